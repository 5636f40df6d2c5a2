// The runner of a JavaScript or TypeScript tool module: Luma's JSON-lines protocol over
// stdin and stdout (one line per message), the module's console output on stderr.
import { register } from "node:module";
import { pathToFileURL } from "node:url";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { writeSync } from "node:fs";

const EXPORTS = ["lumaTools", "tools", "default"];

function send(message) {
  writeSync(1, JSON.stringify(message) + "\n");
}

// the module's console.log must not mix into the protocol: it goes to stderr
console.log = console.error;
console.info = console.error;
process.stdout.write = process.stderr.write.bind(process.stderr);

function toolsOf(namespace) {
  for (const key of EXPORTS) {
    const value = namespace[key];
    if (value !== undefined && value !== null && typeof value === "object") {
      return [key, value];
    }
  }
  return ["the module itself", namespace];
}

function plain(value, path, seen) {
  // a JSON value, or the place where it is not one
  if (value === null || typeof value === "string" || typeof value === "boolean") return null;
  if (typeof value === "number") {
    return Number.isFinite(value) ? null : [path, `${value} is not a JSON number`];
  }
  if (Array.isArray(value) || (typeof value === "object" &&
      Object.getPrototypeOf(value) === Object.prototype) ||
      (typeof value === "object" && Object.getPrototypeOf(value) === null)) {
    if (seen.has(value)) return [path, "the value contains itself"];
    seen.add(value);
    const entries = Array.isArray(value) ? value.map((v, i) => [`${path}[${i}]`, v])
      : Object.entries(value).map(([k, v]) => [path ? `${path}.${k}` : k, v]);
    for (const [where, item] of entries) {
      const problem = plain(item, where, seen);
      if (problem !== null) return problem;
    }
    seen.delete(value);
    return null;
  }
  const kind = value === undefined ? "undefined" : typeof value === "object"
    ? `a ${value.constructor?.name ?? "object"}` : `a ${typeof value}`;
  return [path, `${kind} is not a JSON value`];
}

async function main() {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const iterator = lines[Symbol.asyncIterator]();
  const start = JSON.parse((await iterator.next()).value);
  const here = dirname(new URL(import.meta.url).pathname);
  register("./hooks.mjs", import.meta.url, {
    data: {
      api: pathToFileURL(here + "/luma_tools_api.mjs").href,
      dependencies: start.dependencies, dependenciesKey: `${start.key}.dependencies`,
      searchFrom: [dirname(start.file), start.dependency_root, start.project].filter(Boolean),
    },
  });
  let handlers;
  try {
    const namespace = await import(pathToFileURL(start.file).href);
    const [from, table] = toolsOf(namespace);
    handlers = {};
    for (const [name, value] of Object.entries(table)) {
      if (from === "the module itself" && (name === "datasources" || name === "default")) continue;
      if (typeof value !== "function") {
        throw new Error(`export '${name}' of ${from} is a ${typeof value}, not a function`);
      }
      handlers[name] = value;
    }
  } catch (error) {
    const text = String(error?.message ?? error);
    const message = text === "TYPESCRIPT_MISSING"
      ? `Tool module '${start.written}' is TypeScript, and the 'typescript' package was not ` +
        `found (looked beside the module, in dependency_root and in the program's folder); ` +
        `install it there (npm install typescript).`
      : `Tool module '${start.written}' could not be loaded: ${error?.name ?? "Error"}: ${text}`;
    send({ load_error: { message, line: null } });
    process.exit(0);
  }
  const warning = process.argv[2] ?? "";
  send({ ready: Object.keys(handlers).sort(), warnings: warning ? [warning] : [] });
  const controllers = new Map();
  for await (const line of { [Symbol.asyncIterator]: () => iterator }) {
    const message = JSON.parse(line);
    if ("cancel" in message) {
      controllers.get(message.cancel)?.abort(message.reason ?? "cancelled");
      continue;
    }
    const controller = new AbortController();
    controllers.set(message.id, controller);
    run(handlers[message.tool], message, controller.signal).then((answer) => {
      controllers.delete(message.id);
      send({ id: message.id, ...answer });
    });
  }
  process.exit(0);
}

async function run(handler, message, signal) {
  try {
    const raw = await handler(message.input, signal, message.needs ?? {});
    const problem = plain(raw, "", new Set());
    return problem === null ? { ok: raw } : { invalid: problem };
  } catch (error) {
    if (error && (error.isLumaToolError || error.name === "LumaToolError")) {
      return { tool_error: { code: error.code, message: error.message,
                             retryable: Boolean(error.retryable), details: error.details ?? null,
                             extra: error.extra ?? {} } };
    }
    const text = error instanceof Error ? error.message : String(error);
    return { failure: text || (error?.name ?? "Error"), exception: error?.name ?? "Error" };
  }
}

main();
