package io.kvroute.envoy.internal;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.config.core.v3.HeaderValueOption;
import io.envoyproxy.envoy.config.core.v3.Metadata;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ImmediateResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.StreamedBodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.envoyproxy.envoy.type.v3.HttpStatus;
import io.kvroute.router.FailureAnswer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/** Builders and readers of ext_proc messages. Stateless; thread-safe. */
public final class Messages {
  /**
   * The largest body chunk sent back in one streamed body response: under Envoy's 64 KiB default
   * gRPC message and buffer limits, with margin (llm-d uses the same figure).
   */
  public static final int MAX_CHUNK = 62_000;

  private Messages() {}

  /** The headers as a lower-case map of first values; {@code raw_value} preferred. */
  public static Map<String, String> headers(HeaderMap map) {
    Map<String, String> out = new LinkedHashMap<>();
    for (HeaderValue h : map.getHeadersList()) {
      out.putIfAbsent(h.getKey().toLowerCase(Locale.ROOT), value(h));
    }
    return out;
  }

  /** A header's value: {@code raw_value} when set, else {@code value}. */
  public static String value(HeaderValue h) {
    return h.getRawValue().isEmpty() ? h.getValue() : h.getRawValue().toStringUtf8();
  }

  /** A header that replaces any existing one of the same name. */
  public static HeaderValueOption set(String name, String value) {
    return HeaderValueOption.newBuilder()
        .setHeader(
            HeaderValue.newBuilder()
                .setKey(name)
                .setRawValue(ByteString.copyFrom(value, StandardCharsets.UTF_8)))
        .setAppendAction(HeaderValueOption.HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD)
        .build();
  }

  /** A header mutation setting {@code set} and removing {@code remove}. */
  public static HeaderMutation mutation(Map<String, String> set, List<String> remove) {
    HeaderMutation.Builder b = HeaderMutation.newBuilder();
    set.forEach((k, v) -> b.addSetHeaders(set(k, v)));
    b.addAllRemoveHeaders(remove);
    return b.build();
  }

  /** A struct of string (or, for numbers, number) values. */
  public static Struct struct(Map<String, ?> fields) {
    Struct.Builder b = Struct.newBuilder();
    fields.forEach(
        (k, v) -> {
          if (v instanceof Number) {
            b.putFields(k, Value.newBuilder().setNumberValue(((Number) v).doubleValue()).build());
          } else if (v instanceof Boolean) {
            b.putFields(k, Value.newBuilder().setBoolValue((Boolean) v).build());
          } else {
            b.putFields(k, Value.newBuilder().setStringValue(String.valueOf(v)).build());
          }
        });
    return b.build();
  }

  /** Dynamic metadata with one struct per namespace. */
  public static Struct metadata(Map<String, Struct> namespaces) {
    Struct.Builder b = Struct.newBuilder();
    namespaces.forEach((ns, s) -> b.putFields(ns, Value.newBuilder().setStructValue(s).build()));
    return b.build();
  }

  /** The string value of {@code key} in the filter metadata namespace {@code ns}, if any. */
  public static Optional<String> string(Metadata md, String ns, String key) {
    Struct s = md.getFilterMetadataMap().get(ns);
    if (s == null) {
      return Optional.empty();
    }
    Value v = s.getFieldsMap().get(key);
    return v != null && v.hasStringValue() ? Optional.of(v.getStringValue()) : Optional.empty();
  }

  /**
   * The list value of {@code key} in the filter metadata namespace {@code ns} (a list of strings,
   * or one comma-separated string); empty when absent.
   */
  public static Optional<List<String>> list(Metadata md, String ns, String key) {
    Struct s = md.getFilterMetadataMap().get(ns);
    if (s == null || !s.getFieldsMap().containsKey(key)) {
      return Optional.empty();
    }
    Value v = s.getFieldsMap().get(key);
    List<String> out = new ArrayList<>();
    if (v.hasListValue()) {
      for (Value e : v.getListValue().getValuesList()) {
        if (e.hasStringValue()) {
          out.add(e.getStringValue().trim());
        }
      }
    } else if (v.hasStringValue()) {
      for (String p : v.getStringValue().split(",")) {
        if (!p.isBlank()) {
          out.add(p.trim());
        }
      }
    }
    return Optional.of(out);
  }

  /** A request-headers answer. */
  public static ProcessingResponse requestHeaders(CommonResponse common, Struct metadata) {
    ProcessingResponse.Builder b =
        ProcessingResponse.newBuilder()
            .setRequestHeaders(HeadersResponse.newBuilder().setResponse(common));
    if (metadata != null) {
      b.setDynamicMetadata(metadata);
    }
    return b.build();
  }

  /** A response-headers answer. */
  public static ProcessingResponse responseHeaders(CommonResponse common) {
    return ProcessingResponse.newBuilder()
        .setResponseHeaders(HeadersResponse.newBuilder().setResponse(common))
        .build();
  }

  /** A request-body answer. */
  public static ProcessingResponse requestBody(CommonResponse common, Struct metadata) {
    ProcessingResponse.Builder b =
        ProcessingResponse.newBuilder()
            .setRequestBody(BodyResponse.newBuilder().setResponse(common));
    if (metadata != null) {
      b.setDynamicMetadata(metadata);
    }
    return b.build();
  }

  /** A response-body answer. */
  public static ProcessingResponse responseBody(CommonResponse common, Struct metadata) {
    ProcessingResponse.Builder b =
        ProcessingResponse.newBuilder()
            .setResponseBody(BodyResponse.newBuilder().setResponse(common));
    if (metadata != null) {
      b.setDynamicMetadata(metadata);
    }
    return b.build();
  }

  /** A body mutation carrying one streamed chunk (FULL_DUPLEX_STREAMED). */
  public static CommonResponse streamed(ByteString chunk, boolean endOfStream) {
    return CommonResponse.newBuilder()
        .setBodyMutation(
            BodyMutation.newBuilder()
                .setStreamedResponse(
                    StreamedBodyResponse.newBuilder().setBody(chunk).setEndOfStream(endOfStream)))
        .build();
  }

  /**
   * {@code body} cut into streamed chunks of at most {@link #MAX_CHUNK} bytes; the last one carries
   * {@code endOfStream}. An empty body gives one empty chunk.
   */
  public static List<CommonResponse> streamedChunks(ByteString body, boolean endOfStream) {
    List<CommonResponse> out = new ArrayList<>();
    int n = body.size();
    if (n == 0) {
      out.add(streamed(ByteString.EMPTY, endOfStream));
      return out;
    }
    for (int off = 0; off < n; off += MAX_CHUNK) {
      int end = Math.min(n, off + MAX_CHUNK);
      out.add(streamed(body.substring(off, end), endOfStream && end == n));
    }
    return out;
  }

  /** A trailers answer (request or response side). */
  public static ProcessingResponse trailers(boolean request) {
    ProcessingResponse.Builder b = ProcessingResponse.newBuilder();
    if (request) {
      b.setRequestTrailers(TrailersResponse.getDefaultInstance());
    } else {
      b.setResponseTrailers(TrailersResponse.getDefaultInstance());
    }
    return b.build();
  }

  /**
   * A local reply carrying kvroute's answer to a failure ({@link FailureAnswer}: its status,
   * headers and OpenAI-style JSON body), plus {@code headers}. {@code details} goes to Envoy's
   * {@code %RESPONSE_CODE_DETAILS%}.
   */
  public static ProcessingResponse immediate(
      FailureAnswer answer, Map<String, String> headers, String details) {
    Map<String, String> h = new LinkedHashMap<>(headers);
    answer.headers().forEach((k, v) -> h.put(k.toLowerCase(Locale.ROOT), v));
    return ProcessingResponse.newBuilder()
        .setImmediateResponse(
            ImmediateResponse.newBuilder()
                .setStatus(HttpStatus.newBuilder().setCodeValue(answer.status()))
                .setHeaders(mutation(h, List.of()))
                .setBody(ByteString.copyFrom(answer.body()))
                .setDetails(details))
        .build();
  }
}
