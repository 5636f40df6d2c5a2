"""Generate a corpus of realistic, valid Luma contracts: ``python bench/corpus.py DIR LINES``.

Each file declares schemas (with annotations and a tagged union), tools with every kind of
configuration, a model and an agent whose methods call tools, branch, loop, catch and ask.
"""

from __future__ import annotations

import sys
from pathlib import Path

TEMPLATE = '''// Generated contract {n}: an order desk.
schema Order{n} {{
  id: string @desc("Order id, e.g. o-{n}") @pattern("o-[0-9]+")
  status: enum["open", "shipped", "cancelled"]
  total: float @range(0, 1000000)
  note?: string @length(0, 500)
  tags: string[] @default([])
  email?: string @format("email")
}}

schema Line{n} {{
  sku: string @length(1, 40)
  qty: int @range(1, 1000)
  price: float @range(0, null) @severity("soft")
}}

schema Invoice{n} {{ invoice_number: string, lines: Line{n}[] }}
schema Receipt{n} {{ reference: string, paid: bool }}
schema Document{n} = Invoice{n} | Receipt{n} tagged by kind

schema ToolError{n} {{
  code: string
  message: string
  retryable: bool
  details?: any
}}

schema Database{n} {{
  user: string
  port: int
}}

schema Stats{n} {{ words: int, characters: int }}
schema WriteResult{n} {{ ok: bool, id: string }}
schema Answer{n} {{ summary: string @length(1, 2000), score: float @range(0, 100) }}

tool read_order{n}(id: string @desc("The order id")) -> Order{n} {{
  description: "Read one order by id. Changes nothing; use write_order{n} to change one."
  side_effects: "read"
  cache: true
  timeout: 2000
}}

tool text_stats{n}(text: string @length(0, 100000)) -> Stats{n} {{
  description: "Count the words and characters of a text."
  side_effects: "none"
  cache: true
}}

tool write_order{n}(
  request_id: string @format("uuid"),
  order: Order{n},
  lines: Line{n}[] @length(1, 100),
) -> WriteResult{n} {{
  description: "Create or update an order. Writes to the database."
  side_effects: "write"
  needs db: Database{n}
  scope: "orders:write"
  credential: "ORDERS_DB_PASSWORD"
  error: ToolError{n}
  retries: 3
  retry_backoff: "exponential"
  retry_delay: 100
  idempotent: true
  idempotency_key: request_id
  idempotency_ttl_ms: 600000
}}

tool classify{n}(text: string) -> Document{n} {{
  description: "Classify a document as an invoice or a receipt."
}}

model Model{n} {{
  provider: "openai"
  name: "gpt-5.4-mini"
  temperature: 0
}}

agent Desk{n} {{
  model: Model{n}
  system: "You are a careful order desk assistant."
  tools: [read_order{n}, text_stats{n}, write_order{n}, classify{n}]
  tool_policy: "approval"
  tool_scopes: ["orders:write"]
  tool_rate_limit: 5
  tool_concurrency: 2
  tool_failure_limit: 3
  retries: 1

  fn run(id: string, text: string) -> Answer{n} {{
    order = tool read_order{n}({{ id: id }})
    stats = tool text_stats{n}({{ text: text }})
    total = 0
    for tag in order.tags {{
      total = total + len(tag)
    }}
    if stats.words > 3 and order.status == "open" {{
      bonus = stats.words * 2
    }} else {{
      bonus = 0
    }}
    try {{
      doc = tool classify{n}({{ text: text }})
    }} catch err {{
      print("classification failed: {{err.message}}")
    }}
    ask "Summarize order {{order.id}} with {{stats}} and bonus {{bonus}}." -> Answer{n}
  }}

  fn summary(text: string) -> string {{
    stats = tool text_stats{n}({{ text: text }})
    "{{stats.words}} words"
  }}
}}
'''


def generate(folder: Path, lines: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    per_file = TEMPLATE.count("\n")
    files = max(1, -(-lines // per_file))
    for n in range(files):
        (folder / f"contract_{n:05d}.luma").write_text(TEMPLATE.format(n=n), encoding="utf-8")
    return files * per_file


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/corpus")
    total = generate(out, int(sys.argv[2]) if len(sys.argv) > 2 else 100_000)
    print(f"wrote {total} lines to {out}")
