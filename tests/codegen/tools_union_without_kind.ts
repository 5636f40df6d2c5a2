// A handler for a tool that returns the tagged union Document, but without the tag.
import type { ClassifyHandler } from "./tools.generated";

export const classify: ClassifyHandler = (input) => ({ invoice_number: input.text });
