// Starts a real `ax dev` (the binary in AX_BIN) for the tests against it.
import { spawn, type ChildProcess } from "node:child_process";

export interface AxDev {
  /** The first region's API URL. */
  url: string;
  /** Every region's API URL, by region name. */
  regions: Map<string, string>;
  stop(): Promise<void>;
}

/** Starts `AX_BIN dev --tmp --port 0 args…` and resolves once its banner is out (within 60 s). */
export async function startAxDev(bin: string, ...args: string[]): Promise<AxDev> {
  const child: ChildProcess = spawn(bin, ["dev", "--tmp", "--port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let errs = "";
  child.stderr!.on("data", (d) => (errs = (errs + d).slice(-8_000)));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGINT");
    const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(t);
  };
  const banner = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`ax dev printed no banner in 60 s:\n${out}\n${errs}`)), 60_000);
    child.stdout!.on("data", (d) => {
      out += d;
      if (/Ctrl-C stops everything/.test(out)) {
        clearTimeout(t);
        resolve(out);
      }
    });
    void exited.then((code) => reject(new Error(`ax dev exited (${code}):\n${out}\n${errs}`)));
  }).catch(async (e) => {
    await stop();
    throw e;
  });
  const regions = new Map<string, string>();
  for (const m of banner.matchAll(/^\s+(\S+)\s+API (http:\/\/\S+)/gm)) regions.set(m[1]!, m[2]!);
  const url = [...regions.values()][0];
  if (!url) {
    await stop();
    throw new Error(`no API URL in ax dev's banner:\n${banner}`);
  }
  child.stdout!.resume();
  return { url, regions, stop };
}
