// A module's bridge for tests/codegen/data.luma, typed by the generated file.
import type { ForgetResult, GeneratedDatasources, TopParams, TopResult } from "./data.generated";

export const datasources: GeneratedDatasources = {
  Shop: async (sql: string, params: Record<string, unknown>) =>
    sql.startsWith("DELETE") ? 1 : [{ id: String(params["id"]), total: 1.5 }],
};
export const rows: TopResult = [{ id: "c1", total: 1.5 }];
export const done: ForgetResult = { rows_affected: 1 };
export const params: TopParams = { min_total: 1, limit: 10, region: null };
