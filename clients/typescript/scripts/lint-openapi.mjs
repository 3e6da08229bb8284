// Fails when redocly's recommended rules find anything in
// ../../httpapi/openapi.json or openapi-internal.json (warnings included):
// the spec the SDK and every generated client trust stays lint-clean.
// @redocly/openapi-core is installed by npm ci (openapi-typescript uses
// it); no rule is switched off.
import { lint, loadConfig } from "@redocly/openapi-core";

const config = await loadConfig({});
let problems = 0;
for (const ref of ["../../httpapi/openapi.json", "../../httpapi/openapi-internal.json"]) {
  for (const p of await lint({ ref, config })) {
    problems++;
    console.error(`${ref}: ${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer ?? "?"}`);
  }
}
if (problems > 0) {
  process.exit(1);
}
console.log("redocly lint (recommended): both OpenAPI documents are clean");
