// The Luma extension: the grammar highlights, and `luma lsp` does the rest (diagnostics,
// hover, go to definition, references, rename, outline, completion, formatting, quick fixes).
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace
    .getConfiguration("luma")
    .get("server.command", ["luma", "lsp"]);
  client = new LanguageClient(
    "luma",
    "Luma",
    { command, args },
    { documentSelector: [{ scheme: "file", language: "luma" }, { scheme: "untitled", language: "luma" }] }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
