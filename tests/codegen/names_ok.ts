// Handlers for names.luma, whose names are reserved words in TypeScript.
import type { GeneratedToolModule, Promise_, Ticket } from "./names.generated";

const fallback: Promise_ = { id: "AMS" };

export const tools: GeneratedToolModule = {
  import: (input, signal, needs) => ({
    from: input.from,
    to: (needs?.lambda ?? fallback).id,
    class: input.class ?? "economy",
    in: input.limit,
    __private: false,
  }),
  db_read: (input) => ({ label: input.key, children: [{ label: "leaf", children: [] }] }),
  dbRead: async (input): Promise<Ticket> => ({ def: "Promise", id: input.key }),
};
