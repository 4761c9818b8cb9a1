package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.connector.ConnectorException;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.connector.Leg;
import io.kvroute.connector.UpstreamException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * kvroute's mirror of vLLM's conversion of Messages and Responses bodies to the chat it renders
 * (expected values read off {@code vllm/entrypoints/anthropic/serving.py}, {@code inline_system.py}
 * and {@code vllm/entrypoints/openai/responses/utils.py}), and the two APIs' error shapes.
 */
class ApiBodiesTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static ObjectNode obj(String json) throws Exception {
    return (ObjectNode) JSON.readTree(json);
  }

  @Test
  void messagesSystemBlocksAndLeadingSystemMessagesBecomeOneSystemTurn() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.messages(
            obj(
                "{\"model\":\"m\",\"max_tokens\":9,\"system\":[{\"type\":\"text\",\"text\":"
                    + "\"x-anthropic-billing-header: cc=1\"},{\"type\":\"text\",\"text\":\"A\"},"
                    + "{\"type\":\"text\",\"text\":\"B\"}],\"messages\":[{\"role\":\"system\","
                    + "\"content\":\"C\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                    + "\"text\":\"hi\"}]}]}"));
    JsonNode msgs = c.chatInputs().get("messages");
    assertThat(msgs.toString())
        .isEqualTo(
            "[{\"role\":\"system\",\"content\":\"AB\\n\\nC\"},{\"role\":\"user\",\"content\":\"hi\"}]");
    JsonNode render = JSON.readTree(c.renderJson());
    assertThat(render.get("max_tokens").asInt()).isEqualTo(1);
    assertThat(c.stateful()).isFalse();
  }

  @Test
  void messagesToolTurnsAreConvertedAsVllmDoes() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.messages(
            obj(
                "{\"model\":\"m\",\"max_tokens\":9,\"tools\":[{\"name\":\"get\",\"description\":"
                    + "\"d\",\"input_schema\":{\"type\":\"object\"}}],\"messages\":["
                    + "{\"role\":\"user\",\"content\":\"q\"},"
                    + "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
                    + "\"hmm\"},{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"get\",\"input\":"
                    + "{\"k\":1}}]},"
                    + "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
                    + "\"t1\",\"content\":[{\"type\":\"text\",\"text\":\"r1\"},{\"type\":\"text\","
                    + "\"text\":\"r2\"}]},{\"type\":\"text\",\"text\":\"and?\"}]}]}"));
    assertThat(c.chatInputs().get("messages").toString())
        .isEqualTo(
            "[{\"role\":\"user\",\"content\":\"q\"},"
                + "{\"role\":\"assistant\",\"reasoning\":\"hmm\",\"tool_calls\":[{\"id\":\"t1\","
                + "\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":"
                + "\"{\\\"k\\\":1}\"}}]},"
                + "{\"role\":\"tool\",\"tool_call_id\":\"t1\",\"content\":\"r1\\nr2\"},"
                + "{\"role\":\"user\",\"content\":\"and?\"}]");
    assertThat(c.chatInputs().get("tools").toString())
        .isEqualTo(
            "[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"description\":\"d\","
                + "\"parameters\":{\"type\":\"object\"}}}]");
  }

  @Test
  void inlineSystemMessagesFoldIntoUserTurnsWithoutASystemPrompt() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.messages(
            obj(
                "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":"
                    + "\"q\"},{\"role\":\"system\",\"content\":\"note\"},{\"role\":\"assistant\","
                    + "\"content\":\"a\"},{\"role\":\"system\",\"content\":\"later\"},"
                    + "{\"role\":\"user\",\"content\":\"q2\"}]}"));
    assertThat(c.chatInputs().get("messages").toString())
        .isEqualTo(
            "[{\"role\":\"user\",\"content\":\"q\\n\\nnote\"},"
                + "{\"role\":\"assistant\",\"content\":\"a\"},"
                + "{\"role\":\"user\",\"content\":\"later\\n\\nq2\"}]");
  }

  @Test
  void whatDependsOnTheEnginesRendererHasNoChatForm() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.messages(
            obj(
                "{\"model\":\"m\",\"max_tokens\":9,\"thinking\":{\"type\":\"disabled\"},"
                    + "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}"));
    assertThat(c.chatInputs()).isNull();
    assertThat(c.renderJson()).contains("\"thinking\"");
    assertThatThrownBy(() -> ApiBodies.messages(obj("{\"model\":\"m\",\"messages\":[]}")))
        .isInstanceOf(ConnectorException.InvalidRequestException.class);
  }

  @Test
  void responsesInputBecomesTurnsAndStatefulRequestsHaveNoPrompt() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.responses(
            obj(
                "{\"model\":\"m\",\"instructions\":\"be brief\",\"store\":true,\"input\":["
                    + "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":"
                    + "\"input_text\",\"text\":\"q\"}]},"
                    + "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\","
                    + "\"arguments\":\"{}\"},"
                    + "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"42\"}],"
                    + "\"reasoning\":{\"effort\":\"low\"}}"));
    assertThat(c.chatInputs().get("messages").toString())
        .isEqualTo(
            "[{\"role\":\"system\",\"content\":\"be brief\"},"
                + "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                + "\"text\":\"q\"}]},"
                + "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"function\":"
                + "{\"name\":\"f\",\"arguments\":\"{}\"},\"type\":\"function\"}]},"
                + "{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"c1\"}]");
    assertThat(c.chatInputs().path("chat_template_kwargs").path("reasoning_effort").asText())
        .isEqualTo("low");
    assertThat(JSON.readTree(c.renderJson()).has("store")).isFalse();

    ApiBodies.Converted stateful =
        ApiBodies.responses(
            obj("{\"model\":\"m\",\"previous_response_id\":\"resp_1\",\"input\":\"more\"}"));
    assertThat(stateful.stateful()).isTrue();
    assertThat(stateful.renderJson()).isNull();
    assertThat(stateful.chatInputs()).isNull();
  }

  @Test
  void messagesFailuresAreAnsweredInAnthropicsShape() {
    FailureAnswer a =
        FailureAnswer.of(
                new ConnectorException.NoAvailableEndpointException("nothing serves it"),
                InferenceRequest.Api.MESSAGES)
            .orElseThrow();
    assertThat(a.status()).isEqualTo(503);
    assertThat(new String(a.body(), StandardCharsets.UTF_8))
        .isEqualTo(
            "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                + "\"message\":\"nothing serves it\"}}");
    // an engine's OpenAI-shaped 4xx is rewrapped; the OpenAI APIs keep OpenAI's shape
    UpstreamException engine =
        new UpstreamException(
            Leg.DECODE,
            "d0",
            UpstreamException.Kind.STATUS,
            400,
            null,
            "{\"error\":{\"message\":\"bad\",\"type\":\"BadRequestError\"}}",
            "decode answered 400",
            null);
    String rewrapped =
        new String(
            FailureAnswer.of(engine, InferenceRequest.Api.MESSAGES).orElseThrow().body(),
            StandardCharsets.UTF_8);
    assertThat(rewrapped)
        .startsWith("{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\"");
    assertThat(
            new String(
                FailureAnswer.of(engine, InferenceRequest.Api.RESPONSES).orElseThrow().body(),
                StandardCharsets.UTF_8))
        .contains("BadRequestError");
    assertThat(
            new String(
                FailureAnswer.sseEvent(new RuntimeException("cut"), InferenceRequest.Api.MESSAGES),
                StandardCharsets.UTF_8))
        .startsWith("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"");
  }

  @Test
  void malformedMessagesAreRefusedNamingTheField() {
    String ok = "\"model\":\"m\",\"max_tokens\":9";
    String user = "{\"role\":\"user\",\"content\":";
    assertRefused(
        "{" + ok + ",\"messages\":[" + user + "[{\"type\":\"video\"}]}]}",
        "messages[0].content[0].type",
        "\"video\"",
        "tool_result");
    assertRefused(
        "{" + ok + ",\"messages\":[" + user + "[\"hi\"]}]}",
        "messages[0].content[0]",
        "content block");
    assertRefused("{" + ok + ",\"messages\":[" + user + "42}]}", "messages[0].content");
    assertRefused(
        "{" + ok + ",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
        "messages[0].role",
        "\"tool\"");
    assertRefused("{" + ok + ",\"messages\":\"hi\"}", "messages");
    assertRefused("{\"model\":\"m\",\"messages\":[" + user + "\"q\"}]}", "max_tokens");
    assertRefused(
        "{\"model\":\"m\",\"max_tokens\":\"9\",\"messages\":[" + user + "\"q\"}]}", "max_tokens");
    assertRefused(
        "{" + ok + ",\"system\":{\"text\":\"s\"},\"messages\":[" + user + "\"q\"}]}", "system");
    assertRefused(
        "{"
            + ok
            + ",\"system\":[{\"type\":\"text\",\"text\":7}],"
            + "\"messages\":["
            + user
            + "\"q\"}]}",
        "system[0].text");
    assertRefused(
        "{" + ok + ",\"tools\":[{\"name\":\"f\"}],\"messages\":[" + user + "\"q\"}]}",
        "tools[0]",
        "input_schema");
  }

  @Test
  void claudeCodesCtxAndMsgRolesReadAsUser() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.messages(
            obj(
                "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"ctx\","
                    + "\"content\":\"q\"}]}"));
    assertThat(c.chatInputs().get("messages").toString())
        .isEqualTo("[{\"role\":\"user\",\"content\":\"q\"}]");
  }

  @Test
  void malformedResponsesAreRefusedNamingTheField() {
    assertRefused("{\"model\":\"m\",\"input\":42}", "input");
    assertRefused("{\"model\":\"m\",\"input\":[\"hi\"]}", "input[0]");
    assertRefused("{\"model\":\"m\",\"input\":[{\"type\":1}]}", "input[0].type");
    assertRefused("{\"model\":\"m\",\"input\":\"q\",\"instructions\":[1]}", "instructions");
    assertRefused(
        "{\"model\":\"m\",\"input\":\"q\",\"max_output_tokens\":-1}", "max_output_tokens");
    assertRefused("{\"model\":\"m\",\"input\":\"q\",\"tools\":{}}", "tools");
  }

  @Test
  void responsesItemsOfTypesNotMirroredAreLeftToTheEngine() throws Exception {
    ApiBodies.Converted c =
        ApiBodies.responses(
            obj("{\"model\":\"m\",\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}"));
    assertThat(c.chatInputs()).isNull();
    assertThat(c.renderJson()).contains("item_reference");
  }

  private static void assertRefused(String body, String... inMessage) {
    assertThatThrownBy(
            () -> {
              ObjectNode o = obj(body);
              if (o.has("input")) {
                ApiBodies.responses(o);
              } else {
                ApiBodies.messages(o);
              }
            })
        .as(body)
        .isInstanceOf(ConnectorException.InvalidRequestException.class)
        .hasMessageContainingAll(inMessage)
        .satisfies(e -> assertThat(((ConnectorException) e).httpStatus()).isEqualTo(400));
  }
}
