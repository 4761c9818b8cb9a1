package io.kvroute.cli.demo;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * The demo's workload: multi-turn conversations whose prompts share prefixes, the shape that makes
 * KV-cache-aware routing pay off. Each conversation belongs to one of a few "tenants" whose long
 * system prompt every conversation of that tenant repeats; each turn resends the whole history plus
 * a new user message.
 *
 * <p>Deterministic for a seed. Not thread-safe; {@link #turns()} is built once.
 */
public final class Workload {

  /** One request of the workload: which conversation, which turn, and the chat messages. */
  public record Turn(int conversation, int turn, List<String[]> messages) {}

  private final List<List<Turn>> conversations = new ArrayList<>();

  /**
   * @param tenants distinct system prompts
   * @param conversations conversations in total
   * @param turnsPerConversation turns each
   * @param systemPromptWords length of each system prompt
   * @param seed for the word choice
   */
  public Workload(
      int tenants, int conversations, int turnsPerConversation, int systemPromptWords, long seed) {
    Random r = new Random(seed);
    String[] vocabulary = words();
    List<String> systems = new ArrayList<>();
    for (int t = 0; t < tenants; t++) {
      StringBuilder sb = new StringBuilder("You are assistant #" + t + " of tenant " + t + ". ");
      for (int i = 0; i < systemPromptWords; i++) {
        sb.append(vocabulary[r.nextInt(vocabulary.length)]).append(i % 13 == 12 ? ". " : " ");
      }
      systems.add(sb.toString());
    }
    for (int c = 0; c < conversations; c++) {
      String system = systems.get(c % tenants);
      List<String[]> history = new ArrayList<>();
      history.add(new String[] {"system", system});
      List<Turn> turns = new ArrayList<>();
      for (int t = 0; t < turnsPerConversation; t++) {
        StringBuilder q = new StringBuilder("Conversation " + c + ", question " + t + ": ");
        for (int i = 0; i < 12 + r.nextInt(24); i++) {
          q.append(vocabulary[r.nextInt(vocabulary.length)]).append(' ');
        }
        history.add(new String[] {"user", q.toString()});
        turns.add(new Turn(c, t, List.copyOf(history)));
        StringBuilder a = new StringBuilder("Answer " + t + ": ");
        for (int i = 0; i < 16; i++) {
          a.append(vocabulary[r.nextInt(vocabulary.length)]).append(' ');
        }
        history.add(new String[] {"assistant", a.toString()});
      }
      this.conversations.add(turns);
    }
  }

  /**
   * The requests in a realistic order: round-robin over conversations, so turn t of every
   * conversation comes before turn t+1 of any (while other conversations' turns interleave).
   */
  public List<Turn> turns() {
    List<Turn> out = new ArrayList<>();
    int maxTurns = conversations.stream().mapToInt(List::size).max().orElse(0);
    for (int t = 0; t < maxTurns; t++) {
      for (List<Turn> conv : conversations) {
        if (t < conv.size()) {
          out.add(conv.get(t));
        }
      }
    }
    return out;
  }

  /** The number of conversations. */
  public int conversations() {
    return conversations.size();
  }

  private static String[] words() {
    return ("the of and to in is that it for as with was on be by this are from at or an have not "
            + "cache block prefix token model decode prefill route gateway latency memory tensor "
            + "attention layer batch request stream server cluster node replica shard queue "
            + "vector matrix kernel thread socket event index score filter picker weight profile "
            + "alpha beta gamma delta epsilon zeta theta lambda sigma omega river mountain ocean "
            + "forest desert valley island harbor bridge tower garden meadow canyon glacier")
        .split(" ");
  }
}
