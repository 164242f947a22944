// ids.js prints, for each line of a JSON-lines corpus of strings, the token
// ids Hugging Face's reference tokenizer gives it (no special tokens
// added), one JSON array per line: node ids.js tokenizer.json corpus.jsonl
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const [file, corpus] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(file);
  const lines = fs.readFileSync(corpus, 'utf8').split('\n').filter((l) => l !== '');
  const out = [];
  for (const line of lines) {
    const enc = await tok.encode(JSON.parse(line), null, { addSpecialTokens: false });
    out.push(JSON.stringify(enc.getIds()));
  }
  process.stdout.write(out.join('\n') + '\n');
}

main().catch((e) => {
  console.error('ids.js:', e.message);
  process.exit(1);
});
