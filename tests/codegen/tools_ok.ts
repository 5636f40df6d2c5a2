// A tool module for tools.luma that fits every contract: tsc --strict accepts it.
import type { GeneratedToolModule } from "./tools.generated";

export const tools: GeneratedToolModule = {
  calculate: async (input, signal, needs) => ({
    result: input.operation === "add" ? input.a + input.b : input.a * input.b,
  }),
  text_stats: (input) => ({
    characters: input.text.length,
    words: input.text.trim().split(/\s+/).length,
  }),
  db_write: async (input, signal, needs) => {
    if (signal?.aborted) throw new Error("aborted");
    const port = needs?.db.port ?? 0;
    return { ok: port > 0, rows_written: input.mode === "insert" ? 1 : 0 };
  },
  classify: (input) =>
    input.text.includes("receipt")
      ? { kind: "Receipt", reference: "R-1", items: [{ name: "tea", price: 2 }] }
      : { kind: "Invoice", invoice_number: "A-1" },
};
