// @hey-api/openapi-ts's configuration: `npm run gen-heyapi` writes a client
// generated from ../../httpapi/openapi.json to heyapi/ (git-ignored, made
// again by every build), the way a team generating its own client would.
// Its type check and its run against a real server are the spec's test.
export default {
  input: "../../httpapi/openapi.json",
  output: { path: "heyapi", importFileExtension: ".js" },
  plugins: ["@hey-api/client-fetch", "@hey-api/typescript", "@hey-api/sdk"],
  logs: { level: "warn" },
};
