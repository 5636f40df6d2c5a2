-- The shop's database: examples/cookbook/data/shop.luma fills a fresh one with this.
CREATE TABLE customers (
  id    TEXT PRIMARY KEY,
  name  TEXT NOT NULL,
  total NUMERIC NOT NULL,
  since DATE NOT NULL
);
INSERT INTO customers VALUES
  ('c-1', 'Ada Lovelace', 1250.50, '2021-03-14'),
  ('c-2', 'Alan Turing', 980, '2022-06-23'),
  ('c-3', 'Grace Hopper', 75.25, '2023-12-09');

CREATE TABLE payments (
  id          TEXT PRIMARY KEY,
  customer_id TEXT NOT NULL REFERENCES customers (id),
  amount      REAL NOT NULL
);
