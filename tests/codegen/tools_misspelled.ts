// A handler that returns 'reslt' where CalcResult has 'result'.
import type { CalculateHandler } from "./tools.generated";

export const calculate: CalculateHandler = (input) => ({ reslt: input.a + input.b });
