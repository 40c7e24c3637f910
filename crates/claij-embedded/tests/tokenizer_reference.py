#!/usr/bin/env python3
"""Writes tests/tokenizer-reference.json: llama.cpp's own token ids for a varied set of
strings, against which tests/tokenizer.rs checks claij's tokenizer id for id.

Run it with the llama-cpp-python that scripts/setup/llama-server installs, on the GGUF
file that script fetches (the tokenizer claij reads is that file's metadata):

    ~/.cache/claij/llama-venv/bin/python crates/claij-embedded/tests/tokenizer_reference.py

Arguments (optional): the GGUF file, the output file.
"""

import json
import os
import sys

from llama_cpp import Llama, __version__

CACHE = os.environ.get("CLAIJ_CACHE_DIR", os.path.expanduser("~/.cache/claij"))
MODEL = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer-reference.json")

# Each kind of text the pre-tokenizer and the merges treat differently.
TEXTS = [
    # ASCII words, case, contractions (the GPT-2 pattern's are lower case only).
    "Hello world",
    "Hello, world! It's a test.",
    "I'm sure you're right, we've said they'll know she'd go.",
    "IT'S DON'T I'M",
    "don't won't can't shouldn't",
    "CamelCaseIdentifier snake_case_name kebab-case-name",
    # Digits: one token each.
    "1234567890",
    "3.14159 and -42 and 1e10",
    "invoice 4411 dated 2024-06-01 at 15:30",
    "x=42;y=-7;z=0x1F",
    "00000000001",
    # Punctuation runs.
    "!!! ??? ... --- *** ###",
    "a.b,c;d:e!f?g",
    "(parens) [brackets] {braces} <angles>",
    "\"quoted\" 'single' `backticks`",
    "email@example.com https://example.com/path?q=1&r=2#frag",
    "a/b\\c|d~e^f%g$h",
    # Unicode: accents, other scripts, symbols, emoji, numbers that are not digits.
    "naïve café résumé",
    "Grüße aus München, Ærø og Øresund",
    "日本語のテキストです。",
    "中文文本，标点符号！",
    "Привет, мир!",
    "Γειά σου Κόσμε",
    "हिन्दी में पाठ",
    "العربية نص",
    "한국어 텍스트",
    "€100 £50 ¥20 ₹5",
    "ℕ ∑ ∫ √ ≤ ≥ ≠ ∞",
    "😀 emoji 🎉👍 and 👨‍👩‍👧 family",
    "x² + y³ = ½ ⅓ Ⅻ",
    "e\u0301 combining acute",
    "non\u00a0breaking\u3000ideographic space",
    "zero\u200bwidth",
    # JSON, compact and pretty.
    '{"id":["start","extract"],"text":"Hi"}',
    '{"id": ["route", "billing"], "urgency": "high", "n": 12345, "ok": true, "x": null}',
    '{\n  "id": [\n    "a",\n    "b"\n  ],\n  "nested": {"list": [1, 2.5, -3]}\n}',
    '[{"a":1},{"b":[]},{}]',
    # Whitespace runs.
    "a  b   c    d",
    "\t\ttabs\tand\ttabs\t",
    "\n\n\nnewlines\n",
    "   leading spaces",
    "trailing spaces   ",
    "mixed \t\n \r\n end",
    "  \n  ",
    " ",
    "line one\n\n    indented line\n",
    # Code.
    'fn main() {\n    println!("hi {}", 1 + 2);\n}\n',
    "def f(x):\n\treturn x ** 2  # square\n",
    # ChatML and the other control tokens, written out in the text.
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\n{\"text\": \"x\"}<|im_end|>",
    "before<|endoftext|>after",
    "<|im_end|><|im_start|>",
    "<|im_start|> spaced <|im_end|>",
    "<repo_name>claij<file_sep>src/lib.rs<filename>lib.rs",
    "not a special: <|im_start| and <im_end|>",
    # The triage example's messages.
    "Hi, this is Maria Lopez. Since this morning the PhotoSync app crashes every time I open an album, and I have a client presentation at 3pm today. Please help!",
    "URGENT: invoice 4411 for our TeamChat plan shows the wrong company address and our accountant needs it fixed today. Regards, Jan Novak, ACME Ltd",
    "The export button in ReportPro gives 'Error 500' since the last update. Not urgent, we can wait. Kim",
]


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else MODEL
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    llm = Llama(model_path=model, vocab_only=True, verbose=False)
    cases = [
        {"text": text, "ids": llm.tokenize(text.encode(), add_bos=False, special=True)}
        for text in TEXTS
    ]
    head = {
        "generated_by": "crates/claij-embedded/tests/tokenizer_reference.py",
        "tokenizer": f"llama.cpp (llama-cpp-python {__version__}), "
        "tokenize(text, add_bos=False, special=True)",
        "model": os.path.basename(model),
    }
    # One case a line, so that a change shows as the lines of the cases it changes.
    lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
    lines.append(' "cases": [')
    lines.append(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
    lines.append(" ]")
    with open(out, "w", encoding="utf-8") as f:
        f.write("{\n" + "\n".join(lines) + "\n}\n")
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
