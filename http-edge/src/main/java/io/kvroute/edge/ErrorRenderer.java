package io.kvroute.edge;

/**
 * Renders the JSON body of an error answer. The default, {@link #OPENAI}, writes the OpenAI error
 * shape: {@code
 * {"error":{"message":"…","type":"invalid_request_error","param":"body","code":413}}}.
 */
@FunctionalInterface
public interface ErrorRenderer {
  /** The type given to refusals of malformed or oversized requests (4xx). */
  String INVALID_REQUEST = "invalid_request_error";

  /** The OpenAI error shape. */
  ErrorRenderer OPENAI =
      (status, type, param, message) -> {
        StringBuilder b = new StringBuilder(96 + message.length());
        b.append("{\"error\":{\"message\":");
        Json.quote(b, message);
        b.append(",\"type\":");
        Json.quote(b, type);
        b.append(",\"param\":");
        if (param == null) {
          b.append("null");
        } else {
          Json.quote(b, param);
        }
        b.append(",\"code\":").append(status).append("}}");
        return b.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
      };

  /**
   * The JSON body of one error answer.
   *
   * @param status the HTTP status
   * @param type the error type, e.g. {@code invalid_request_error}
   * @param param the request part the error is about ({@code body}, {@code headers}, a header
   *     name), or {@code null}
   * @param message what went wrong, for a person
   * @return UTF-8 JSON
   */
  byte[] render(int status, String type, String param, String message);

  /**
   * The JSON body of one error answer to a request for {@code path}: by default {@link #render(int,
   * String, String, String)}, whatever the path. A server whose routes speak several APIs overrides
   * it to answer each in its own error shape (the gateway answers {@code /v1/messages} in
   * Anthropic's), refusals of the edge itself (413, 405, 408...) included.
   *
   * @param path the request's path without its query, or {@code null} when the request line was not
   *     read (a request refused before it, e.g. headers too large)
   * @param status the HTTP status
   * @param type the error type, e.g. {@code invalid_request_error}
   * @param param the request part the error is about, or {@code null}
   * @param message what went wrong, for a person
   * @return UTF-8 JSON
   */
  default byte[] render(String path, int status, String type, String param, String message) {
    return render(status, type, param, message);
  }

  /** JSON string quoting. */
  final class Json {
    private Json() {}

    /**
     * Appends {@code s} as a JSON string literal.
     *
     * @param b where to append
     * @param s the text
     */
    public static void quote(StringBuilder b, String s) {
      b.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        switch (c) {
          case '"':
            b.append("\\\"");
            break;
          case '\\':
            b.append("\\\\");
            break;
          case '\n':
            b.append("\\n");
            break;
          case '\r':
            b.append("\\r");
            break;
          case '\t':
            b.append("\\t");
            break;
          default:
            if (c < 0x20 || c == 0x7f || c == 0x2028 || c == 0x2029) {
              b.append(String.format(java.util.Locale.ROOT, "\\u%04x", (int) c));
            } else {
              b.append(c);
            }
        }
      }
      b.append('"');
    }
  }
}
