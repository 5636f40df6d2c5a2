// What a JavaScript or TypeScript tool module may take from "luma": LumaToolError
// (require("luma") in CommonJS; luma_tools_api.mjs hands the same class to import).
class LumaToolError extends Error {
  constructor(fields = {}) {
    const { code = "TOOL_ERROR", message = "", retryable = false, details, ...extra } =
      typeof fields === "string" ? { code: fields } : fields;
    super(message || code);
    this.name = "LumaToolError";
    this.code = code;
    this.message = message || code;
    this.retryable = retryable;
    this.details = details;
    this.extra = extra;
    this.isLumaToolError = true;
  }
}

module.exports = { LumaToolError };
