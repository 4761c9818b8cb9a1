package io.kvroute.tokenizer.hf.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvroute.tokenizer.hf.ChatTemplateException;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The interpreter's jinja2 semantics (as transformers configures it), case by case. Expected
 * outputs are what Python's jinja2 3.1 prints with trim_blocks, lstrip_blocks and loopcontrols.
 */
class JinjaTemplateTest {
  private static final ZonedDateTime NOW =
      ZonedDateTime.of(2026, 11, 5, 9, 7, 3, 0, ZoneOffset.UTC);

  private static String render(String template, Map<String, Object> ctx) {
    return JinjaTemplate.compile(template, () -> NOW).render(ctx);
  }

  private static String render(String template) {
    return render(template, Map.of());
  }

  private static Map<String, Object> ctx(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  @Test
  void whitespaceControlTrimAndLstripBlocks() {
    assertThat(render("a\n  {% if true %}\n  b\n  {% endif %}\nc")).isEqualTo("a\n  b\nc");
    assertThat(render("a  {%- if true -%}  b  {%- endif %}")).isEqualTo("ab");
    assertThat(render("x {{- ' y ' -}} z")).isEqualTo("x y z");
    assertThat(render("a\n  {%+ if true %}b{% endif %}")).isEqualTo("a\n  b");
    assertThat(render("{# c #}\n  {# d #}\nx")).isEqualTo("x");
    assertThat(render("{% raw %}{{ not }}{% endraw %}")).isEqualTo("{{ not }}");
    assertThat(render("{% if true %}a{% endif %}  {% if true %}b{% endif %}")).isEqualTo("a  b");
  }

  @Test
  void loopsAndLoopVariables() {
    assertThat(
            render(
                "{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
                ctx("xs", List.of("a", "b", "c"))))
        .isEqualTo("1a,2b,3c");
    assertThat(
            render(
                "{% for x in xs if x > 1 %}{{ loop.index0 }}:{{ x }}/{{ loop.length }} {% endfor %}",
                ctx("xs", List.of(1L, 2L, 3L))))
        .isEqualTo("0:2/2 1:3/2 ");
    assertThat(render("{% for x in [] %}x{% else %}empty{% endfor %}")).isEqualTo("empty");
    assertThat(
            render(
                "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
                    + "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"))
        .isEqualTo("013");
    assertThat(
            render(
                "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                ctx("d", ctx("a", 1L, "b", null))))
        .isEqualTo("a=1;b=None;");
    assertThat(
            render("{% for x in 'ab' %}{{ loop.revindex }}{{ loop.cycle('x','y') }}{% endfor %}"))
        .isEqualTo("2x1y");
  }

  @Test
  void scopingAndNamespace() {
    assertThat(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"))
        .isEqualTo("1");
    assertThat(
            render(
                "{% set ns = namespace(found=false, n=xs|length - 1) %}{% for i in xs %}"
                    + "{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}"
                    + "{{ ns.found }} {{ ns.n }}",
                ctx("xs", List.of(1L, 2L))))
        .isEqualTo("True 1");
    assertThat(render("{% set a, b = 1, 2 %}{{ a + b }}")).isEqualTo("3");
    assertThat(render("{% set t %}in {{ 1 }}{% endset %}[{{ t }}]")).isEqualTo("[in 1]");
  }

  @Test
  void pythonStringMethodsAndSlicing() {
    Map<String, Object> c = ctx("s", "<think>\nA\n</think>\n\nB", "xs", List.of(1L, 2L, 3L));
    assertThat(render("{{ s.split('</think>')[-1].lstrip('\\n') }}", c)).isEqualTo("B");
    assertThat(
            render(
                "{{ s.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", c))
        .isEqualTo("A");
    assertThat(render("{{ xs[::-1] }} {{ xs[1:] }} {{ 'héllo'[1:3] }} {{ '😀ab'[0] }}", c))
        .isEqualTo("[3, 2, 1] [2, 3] él 😀");
    assertThat(render("{{ '  x  '.strip() }}|{{ 'a,b'.split(',') }}|{{ ' a  b '.split() }}"))
        .isEqualTo("x|['a', 'b']|['a', 'b']");
    assertThat(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}"))
        .isEqualTo("TrueTrue");
    assertThat(
            render("{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [3] }}"))
        .isEqualTo("True True True False");
    assertThat(
            render("{{ 'Hello World'.upper() }} {{ 'x'.title() }} {{ 'a-b'.replace('-', '+') }}"))
        .isEqualTo("HELLO WORLD X a+b");
  }

  @Test
  void filtersAndTests() {
    Map<String, Object> c =
        ctx("m", ctx("role", "user", "content", "hi"), "xs", List.of(ctx("n", "a"), ctx("n", "b")));
    assertThat(render("{{ m | tojson }}", c))
        .isEqualTo("{\"role\": \"user\", \"content\": \"hi\"}");
    assertThat(render("{{ m | tojson(indent=2) }}", c))
        .isEqualTo("{\n  \"role\": \"user\",\n  \"content\": \"hi\"\n}");
    assertThat(render("{{ {'b': 1, 'a': [1.0, none, true]} | tojson(sort_keys=true) }}"))
        .isEqualTo("{\"a\": [1.0, null, true], \"b\": 1}");
    assertThat(render("{{ 'ü\"\\n' | tojson }}")).isEqualTo("\"ü\\\"\\n\"");
    assertThat(render("{{ xs | map(attribute='n') | join(', ') }}", c)).isEqualTo("a, b");
    assertThat(render("{{ xs | selectattr('n', 'equalto', 'b') | list | length }}", c))
        .isEqualTo("1");
    assertThat(
            render(
                "{{ '  x ' | trim }}|{{ undefined_var | default('d') }}|{{ [3,1,2] | sort | first }}"))
        .isEqualTo("x|d|1");
    assertThat(
            render(
                "{{ m.content is string }} {{ m.nope is defined }} {{ none is none }} {{ m is mapping }}",
                c))
        .isEqualTo("True False True True");
    assertThat(render("{{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ [] is iterable }}"))
        .isEqualTo("True True True");
    assertThat(render("{{ 'line1\\nline2' | indent(2) }}")).isEqualTo("line1\n  line2");
  }

  @Test
  void escapingSortingAndFilteredBlocks() {
    assertThat(render("{{ '<a href=\"x\">&\\'' | e }}"))
        .isEqualTo("&lt;a href=&#34;x&#34;&gt;&amp;&#39;");
    assertThat(
            render(
                "{{ ['b', 'A', 'c'] | sort | join(',') }} {{ ['b', 'A', 'c'] | sort(true) | join }}"))
        .isEqualTo("A,b,c cbA");
    assertThat(
            render(
                "{{ [{'n': 'b'}, {'n': 'A'}] | sort(attribute='n') | map(attribute='n') | join }}"))
        .isEqualTo("Ab");
    assertThat(
            render(
                "{% for k, v in {'b': 1, 'A': 2, 'c': 0} | dictsort %}{{ k }}{{ v }}{% endfor %} "
                    + "{% for k, v in {'b': 1, 'A': 2, 'c': 0} | dictsort(by='value') %}"
                    + "{{ k }}{{ v }}{% endfor %}"))
        .isEqualTo("A2b1c0 c0b1A2");
    assertThat(
            render(
                "{% filter upper %}ab{% endfilter %}|{% set x | trim %}  hi  {% endset %}{{ x }}"))
        .isEqualTo("AB|hi");
    assertThat(
            render(
                "{% macro m(a, b=2) %}{{ a }}{{ b }}{{ caller() }}{% endmacro %}"
                    + "{% call m(1, b=3,) %}c{% endcall %}"))
        .isEqualTo("13c");
    assertThat(render("{{ [1, 2,] | length }}{{ {'a': 1,} | length }}{{ range(1, 3,) | list }}"))
        .isEqualTo("21[1, 2]");
  }

  @Test
  void expressionsFollowPython() {
    assertThat(
            render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"))
        .isEqualTo("3 -4 1 2 3.5 1024");
    assertThat(render("{{ 1 ~ 'a' ~ none }} {{ [1] + [2] }} {{ 'ab' * 2 }}"))
        .isEqualTo("1aNone [1, 2] abab");
    assertThat(render("{{ 'yes' if 1 < 2 < 3 else 'no' }} {{ 0 or 'x' }} {{ 1 and 0 }}"))
        .isEqualTo("yes x 0");
    assertThat(render("{{ messages|length - 1 }}", ctx("messages", List.of(1L, 2L))))
        .isEqualTo("1");
    assertThat(render("{{ not true or true }} {{ - 3 | abs }}")).isEqualTo("True 3");
    assertThat(render("{{ x }}|{{ 1.5 }}|{{ true }}|{{ none }}", ctx()))
        .isEqualTo("|1.5|True|None");
    assertThat(render("{{ {'a': 1}['a'] }}{{ {'a': 1}.get('b', 2) }}{{ [1,2][-1] }}"))
        .isEqualTo("122");
  }

  @Test
  void macrosAndCallBlocks() {
    assertThat(
            render(
                "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                    + "{{ greet('A') }} {{ greet('B', punct='?') }}"))
        .isEqualTo("Hi A! Hi B?");
    assertThat(
            render(
                "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}in{% endcall %}"))
        .isEqualTo("[in]");
  }

  @Test
  void globalsOfTransformers() {
    assertThat(render("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M:%S %A') }}"))
        .isEqualTo("05 Nov 2026 2026-11-05 09:07:03 Thursday");
    assertThatThrownBy(() -> render("{{ raise_exception('Only user and assistant roles!') }}"))
        .isInstanceOf(ChatTemplateException.class)
        .hasMessage("Only user and assistant roles!");
    assertThat(render("{% generation %}x{% endgeneration %}")).isEqualTo("x");
  }

  @Test
  void theSandboxIsImmutableAndErrorsAreSpecific() {
    assertThatThrownBy(() -> render("{% set l = [] %}{{ l.append(1) }}"))
        .isInstanceOf(ChatTemplateException.class)
        .hasMessageContaining("immutable sandbox");
    assertThatThrownBy(() -> render("{{ missing.attr }}"))
        .isInstanceOf(ChatTemplateException.class)
        .hasMessageContaining("'missing' is undefined");
    assertThatThrownBy(() -> render("{{ 'a' + 1 }}"))
        .isInstanceOf(ChatTemplateException.class)
        .hasMessageContaining("unsupported operand");
    assertThatThrownBy(() -> JinjaTemplate.compile("{% if x %}", () -> NOW))
        .isInstanceOf(ChatTemplateException.class)
        .hasMessageContaining("syntax error");
    assertThatThrownBy(() -> JinjaTemplate.compile("{{ x | }}", () -> NOW))
        .isInstanceOf(ChatTemplateException.class);
  }

  @Test
  void referencedNamesDriveKwargsFiltering() {
    JinjaTemplate t =
        JinjaTemplate.compile(
            "{% if enable_thinking is defined %}{{ messages }}{% endif %}", () -> NOW);
    assertThat(t.variableNames()).contains("enable_thinking", "messages");
  }
}
