package io.kvroute.router;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvroute.connector.Endpoint;
import io.kvroute.connector.InferenceRequest;
import io.kvroute.scoring.SchedulingRequest;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** How an OpenAI request body becomes a {@link SchedulingRequest}: the chat template inputs. */
class OpenAiRequestsTest {
  private static final List<Endpoint> PODS =
      List.of(Endpoint.of("http://127.0.0.1:1", Endpoint.Role.BOTH));

  private static SchedulingRequest chat(String body) {
    return OpenAiRequests.toSchedulingRequest(
        InferenceRequest.of(
            InferenceRequest.Api.CHAT_COMPLETIONS,
            body.getBytes(StandardCharsets.UTF_8),
            Map.of(),
            "r"),
        model -> PODS);
  }

  @Test
  void plainRoleAndContentChatsNeedNoTemplateInputs() {
    SchedulingRequest r =
        chat(
            "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
                + "{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0,\"stream\":true}");
    assertThat(r.chatTemplateInputs()).isEmpty();
    assertThat(r.messages().orElseThrow()).hasSize(2);
  }

  @Test
  void toolsKwargsAndToolTurnsAreKeptForTheTemplate() {
    String messages =
        "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
            + "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
            + "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}]";
    SchedulingRequest r =
        chat(
            "{\"model\":\"m\",\"messages\":"
                + messages
                + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                + "\"chat_template_kwargs\":{\"enable_thinking\":false},\"max_tokens\":5}");
    assertThat(r.chatTemplateInputs())
        .contains(
            "{\"messages\":"
                + messages
                + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                + "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
  }

  @Test
  void aMessageBeyondRoleAndStringContentOrATemplateFlagIsEnough() {
    assertThat(
            chat("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                    + "[{\"type\":\"text\",\"text\":\"a\"}]}]}")
                .chatTemplateInputs())
        .isPresent();
    assertThat(
            chat("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                    + "\"add_generation_prompt\":false}")
                .chatTemplateInputs())
        .contains(
            "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"add_generation_prompt\":false}");
    assertThat(
            chat("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                    + "\"tools\":null}")
                .chatTemplateInputs())
        .isEmpty();
  }
}
