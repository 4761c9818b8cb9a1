package io.kvroute.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvroute.tokenizer.hf.ChatRequest;
import io.kvroute.tokenizer.hf.ChatTemplateException;
import io.kvroute.tokenizer.hf.HfTokenizer;
import io.kvroute.tokenizer.hf.TokenizerLoadException;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code kvroute tokenize}: the token ids vLLM would compute for a prompt or a chat request, with
 * the model's own {@code tokenizer.json} and chat template, offline.
 */
@Command(
    name = "tokenize",
    mixinStandardHelpOptions = true,
    header = "Prints the token ids vLLM computes for a prompt or a chat request, offline.",
    description = {
      "Prints the token ids vLLM computes for a completion prompt or a /v1/chat/completions body,",
      "locally, from a model directory or a Hugging Face cache (models--org--name): prints",
      "{\"count\": N, \"tokens\": [...]} like vLLM's /tokenize, or the rendered chat prompt with",
      "--render. Nothing is downloaded."
    })
final class TokenizeCommand implements Callable<Integer> {

  @Option(
      names = "--model-dir",
      required = true,
      paramLabel = "DIR",
      description = "A directory with tokenizer.json, a snapshot, or a models--org--name cache dir")
  Path modelDir;

  @Option(names = "--revision", description = "Snapshot of a cache dir (default: refs/main)")
  String revision;

  @Option(
      names = "--chat-template",
      paramLabel = "FILE",
      description = "A Jinja chat template replacing the model's (default: the model's own)")
  Path chatTemplate;

  static final class Input {
    @Option(
        names = "--prompt",
        paramLabel = "TEXT",
        description = "A completion prompt (add_special_tokens=true); '-' reads stdin")
    String prompt;

    @Option(
        names = "--chat",
        paramLabel = "FILE",
        description = "A /v1/chat/completions JSON body (or a bare messages array); '-' is stdin")
    String chat;
  }

  @ArgGroup(exclusive = true, multiplicity = "1")
  Input input;

  @Option(
      names = "--add-special-tokens",
      negatable = true,
      description = "Override add_special_tokens (default: true for prompts, false for chats)")
  Boolean addSpecialTokens;

  @Option(names = "--render", description = "Print the rendered chat prompt instead of ids")
  boolean render;

  @Option(
      names = "--engine",
      defaultValue = "AUTO",
      description = "AUTO (Java byte-level BPE when it applies), JAVA or NATIVE (DJL)")
  HfTokenizer.Engine engine;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() throws IOException {
    PrintWriter out = spec.commandLine().getOut();
    PrintWriter err = spec.commandLine().getErr();
    HfTokenizer.Builder b =
        HfTokenizer.builder().path(modelDir).revision(revision).engine(engine).cache(0, 0);
    if (chatTemplate != null) {
      b.chatTemplate(Files.readString(chatTemplate, StandardCharsets.UTF_8));
    }
    try (HfTokenizer tokenizer = b.build()) {
      int[] ids;
      if (input.prompt != null) {
        if (render) {
          throw new CommandLine.ParameterException(
              spec.commandLine(), "--render needs --chat (a prompt is not templated)");
        }
        String prompt = input.prompt.equals("-") ? readStdin() : input.prompt;
        ids = tokenizer.encode(prompt, addSpecialTokens == null || addSpecialTokens);
      } else {
        ChatRequest req = chatRequest(input.chat.equals("-") ? readStdin() : read(input.chat));
        if (render) {
          out.print(tokenizer.renderChat(req));
          out.flush();
          return 0;
        }
        ids = tokenizer.encodeChat(req);
      }
      StringBuilder sb =
          new StringBuilder("{\"count\":").append(ids.length).append(",\"tokens\":[");
      for (int i = 0; i < ids.length; i++) {
        if (i > 0) {
          sb.append(',');
        }
        sb.append(ids[i]);
      }
      out.println(sb.append("]}"));
      out.flush();
      return 0;
    } catch (TokenizerLoadException | ChatTemplateException | IllegalArgumentException e) {
      err.println("kvroute tokenize: " + e.getMessage());
      err.flush();
      return 2;
    }
  }

  private ChatRequest chatRequest(String text) {
    ObjectMapper json = new ObjectMapper();
    JsonNode root;
    try {
      root = json.readTree(text);
    } catch (IOException e) {
      throw new IllegalArgumentException("--chat is not valid JSON: " + e.getMessage(), e);
    }
    if (root != null && root.isArray()) {
      ObjectNode body = json.createObjectNode();
      body.set("messages", root);
      root = body;
    }
    if (addSpecialTokens != null && root != null && root.isObject()) {
      ((ObjectNode) root).put("add_special_tokens", addSpecialTokens.booleanValue());
    }
    return ChatRequest.fromJson(root);
  }

  private static String read(String file) throws IOException {
    return Files.readString(Path.of(file), StandardCharsets.UTF_8);
  }

  private static String readStdin() throws IOException {
    return new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
  }
}
