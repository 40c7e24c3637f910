"""claij serve's OpenAI-compatible endpoint driven by the official `openai` client.

  openai_chat.py BASE_URL API_KEY MODEL

Lists the models, asks MODEL once plainly and once streaming, asks a workflow that does
not exist and one with an input it refuses; prints what it saw as one JSON object.
"""

import json
import sys

import openai


def main() -> None:
    base, key, model = sys.argv[1:4]
    client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
    out: dict = {}
    out["models"] = sorted(m.id for m in client.models.list())
    messages = [
        {"role": "system", "content": "You are a workflow."},
        {"role": "user", "content": "Ada"},
    ]
    plain = client.chat.completions.create(model=model, messages=messages)
    out["plain"] = {
        "content": plain.choices[0].message.content,
        "role": plain.choices[0].message.role,
        "finish_reason": plain.choices[0].finish_reason,
        "model": plain.model,
        "id": plain.id,
    }
    pieces = []
    finish = None
    for chunk in client.chat.completions.create(model=model, messages=messages, stream=True):
        if chunk.choices:
            delta = chunk.choices[0].delta
            if delta.content:
                pieces.append(delta.content)
            finish = chunk.choices[0].finish_reason or finish
    out["stream"] = {"content": "".join(pieces), "chunks": len(pieces), "finish_reason": finish}
    try:
        client.chat.completions.create(model="fsm:no-such-workflow", messages=messages)
        out["unknown"] = None
    except openai.NotFoundError as e:
        out["unknown"] = {"status": e.status_code, "message": str(e.message)}
    try:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": '{"name": 7}'}]
        )
        out["refused"] = None
    except openai.APIStatusError as e:
        out["refused"] = {"status": e.status_code, "message": str(e.message)}
    try:
        openai.OpenAI(base_url=base + "/v1", api_key="wrong-key-of-enough-length-0123456789", max_retries=0).models.list()
        out["wrong_key"] = None
    except openai.AuthenticationError as e:
        out["wrong_key"] = {"status": e.status_code}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
