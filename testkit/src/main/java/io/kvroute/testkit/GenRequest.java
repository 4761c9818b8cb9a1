package io.kvroute.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import io.kvroute.kvindex.hash.BlockExtraKeys;
import io.kvroute.testkit.internal.BadRequest;
import io.kvroute.testkit.internal.BlockPool;
import io.kvroute.testkit.internal.Responder;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A parsed, validated {@code /v1/completions}, {@code /v1/chat/completions}, {@code /v1/messages}
 * or {@code /v1/responses} request, with vLLM's validation messages. A Messages or Responses
 * request is held as the chat request vLLM turns it into ({@link ApiChats}).
 *
 * <p>Immutable; the JSON body must not be modified.
 *
 * @param chat chat-completion rather than completion (Messages and Responses are chats)
 * @param framing the API whose response format is written
 * @param body the request body (a Messages or Responses body converted to a chat)
 * @param model the model asked for: the base model or a LoRA adapter
 * @param lora the LoRA adapter, or null for the base model
 * @param loraId the LoRA int id (1-based position in the served list), or null
 * @param prompt the prompt's token ids
 * @param maxTokens the number of tokens to generate
 * @param streaming how the response streams
 * @param id the response id ({@code cmpl-...} or {@code chatcmpl-...})
 * @param internalId the id unique to this pod (the NIXL {@code remote_request_id})
 * @param extras the block-hash extra keys (LoRA name, cache salt)
 */
record GenRequest(
    boolean chat,
    Responder.Framing framing,
    ObjectNode body,
    String model,
    String lora,
    Long loraId,
    int[] prompt,
    int maxTokens,
    Responder.Streaming streaming,
    String id,
    String internalId,
    BlockExtraKeys extras) {

  /**
   * Validates a request as vLLM would and tokenizes its prompt.
   *
   * @param b the pod's configuration
   * @param pool the pod's block pool (a request must fit in it)
   * @param counter numbers the pod's requests, for {@link #internalId()}
   * @param ex the exchange (for {@code X-Request-Id})
   * @param json the parsed body, or null
   * @param framing the API the request was sent to
   * @throws BadRequest with vLLM's status and message when the request is invalid
   */
  static GenRequest parse(
      VllmSimulator.Builder b,
      BlockPool pool,
      AtomicLong counter,
      HttpExchange ex,
      JsonNode json,
      Responder.Framing framing)
      throws BadRequest {
    if (framing == Responder.Framing.MESSAGES) {
      json = ApiChats.fromMessages(json);
    } else if (framing == Responder.Framing.RESPONSES) {
      json = ApiChats.fromResponses(json);
    }
    boolean chat = framing != Responder.Framing.COMPLETION;
    if (json == null || !json.isObject()) {
      throw new BadRequest(400, "request body must be a JSON object");
    }
    String model = json.path("model").isTextual() ? json.get("model").asText() : b.model;
    String lora = null;
    Long loraId = null;
    if (!model.equals(b.model)) {
      int idx = b.loras.indexOf(model);
      if (idx < 0) {
        throw new BadRequest(404, "The model `" + model + "` does not exist.");
      }
      lora = model;
      loraId = (long) idx + 1;
    }
    int[] prompt;
    try {
      prompt = chat ? chatPrompt(b.tokenizer, json) : completionPrompt(b.tokenizer, json);
    } catch (IllegalArgumentException e) {
      throw new BadRequest(400, e.getMessage());
    }
    if (prompt.length == 0) {
      throw new BadRequest(400, "prompt must not be empty");
    }
    int maxTokens = maxTokens(b, json, chat);
    checkFits(b, pool, prompt.length, maxTokens);
    boolean stream = json.path("stream").asBoolean(false);
    boolean includeUsage =
        stream && json.path("stream_options").path("include_usage").asBoolean(false);
    Responder.Streaming streaming =
        !stream
            ? Responder.Streaming.NONE
            : includeUsage ? Responder.Streaming.EVENTS_WITH_USAGE : Responder.Streaming.EVENTS;
    String rid = ex.getRequestHeaders().getFirst("X-Request-Id");
    if (rid == null || rid.isBlank()) {
      rid = UUID.randomUUID().toString().replace("-", "");
    }
    String id =
        switch (framing) {
          case MESSAGES -> "msg_" + rid;
          case RESPONSES -> "resp_" + rid;
          case CHAT -> "chatcmpl-" + rid;
          default -> "cmpl-" + rid;
        };
    String internalId = id + "-" + Long.toHexString(counter.incrementAndGet());
    BlockExtraKeys.Builder ek = BlockExtraKeys.builder().loraName(lora);
    if (json.path("cache_salt").isTextual()) {
      ek.cacheSalt(json.get("cache_salt").asText());
    }
    return new GenRequest(
        chat,
        framing,
        (ObjectNode) json,
        model,
        lora,
        loraId,
        prompt,
        maxTokens,
        streaming,
        id,
        internalId,
        ek.build());
  }

  private static int[] chatPrompt(EngineTokenizer tokenizer, JsonNode json) throws BadRequest {
    if (!json.path("messages").isArray()) {
      throw new BadRequest(400, "messages must be an array");
    }
    return tokenizer.encodeChat(json);
  }

  private static int[] completionPrompt(EngineTokenizer tokenizer, JsonNode json)
      throws BadRequest {
    JsonNode p = json.get("prompt");
    if (p != null && p.isTextual()) {
      return tokenizer.encodePrompt(p.asText());
    } else if (p != null && p.isArray() && p.size() > 0 && p.get(0).isIntegralNumber()) {
      int[] ids = new int[p.size()];
      for (int i = 0; i < p.size(); i++) {
        if (!p.get(i).canConvertToInt() || p.get(i).asInt() < 0) {
          throw new BadRequest(400, "prompt token ids must be non-negative ints");
        }
        ids[i] = p.get(i).asInt();
      }
      return ids;
    } else if (p != null && p.isArray() && p.size() == 1 && p.get(0).isTextual()) {
      return tokenizer.encodePrompt(p.get(0).asText());
    }
    throw new BadRequest(
        400,
        "prompt must be a string, a list of token ids or a one-element list of strings"
            + " (the simulator serves no batches)");
  }

  private static int maxTokens(VllmSimulator.Builder b, JsonNode json, boolean chat)
      throws BadRequest {
    JsonNode mt =
        chat && json.hasNonNull("max_completion_tokens")
            ? json.get("max_completion_tokens")
            : json.get("max_tokens");
    int maxTokens = b.defaultMaxTokens;
    if (mt != null && !mt.isNull()) {
      if (!mt.canConvertToInt() || mt.asInt() < 1) {
        throw new BadRequest(400, "max_tokens must be an integer >= 1, was " + mt);
      }
      maxTokens = mt.asInt();
    }
    JsonNode minT = json.get("min_tokens");
    if (minT != null && minT.canConvertToInt() && minT.asInt() > maxTokens) {
      throw new BadRequest(
          400,
          "min_tokens must be less than or equal to max_tokens="
              + maxTokens
              + ", got "
              + minT.asInt());
    }
    return maxTokens;
  }

  private static void checkFits(
      VllmSimulator.Builder b, BlockPool pool, int promptLen, int maxTokens) throws BadRequest {
    if (promptLen + maxTokens > b.maxModelLen) {
      throw new BadRequest(
          400,
          "This model's maximum context length is "
              + b.maxModelLen
              + " tokens. However, you requested "
              + (promptLen + maxTokens)
              + " tokens ("
              + promptLen
              + " in the messages, "
              + maxTokens
              + " in the completion).");
    }
    if (!pool.fits(promptLen + maxTokens)) {
      throw new BadRequest(
          400,
          "request needs "
              + pool.blocksFor(promptLen + maxTokens)
              + " KV blocks but the simulator has only "
              + pool.numBlocks());
    }
  }
}
