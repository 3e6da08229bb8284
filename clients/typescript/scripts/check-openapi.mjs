// Fails when src/openapi.ts is not what openapi-typescript makes of
// ../../httpapi/openapi.json: the SDK's types cannot drift from the server.
// Regenerate with `npm run gen`.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "ax-openapi-"));
try {
  const out = join(dir, "openapi.ts");
  execFileSync(process.execPath, ["node_modules/openapi-typescript/bin/cli.js", "../../httpapi/openapi.json", "-o", out], { stdio: ["ignore", "ignore", "inherit"] });
  if (readFileSync(out, "utf8") !== readFileSync("src/openapi.ts", "utf8")) {
    console.error("src/openapi.ts is stale: httpapi/openapi.json changed. Run `npm run gen` in clients/typescript and commit src/openapi.ts.");
    process.exit(1);
  }
  console.log("src/openapi.ts matches httpapi/openapi.json");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
