// What a JavaScript or TypeScript tool module may import from "luma": LumaToolError, the class
// require("luma") gives CommonJS modules.
import api from "./luma_tools_api.cjs";

export const LumaToolError = api.LumaToolError;
