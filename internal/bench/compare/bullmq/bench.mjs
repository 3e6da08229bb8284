// bullmqbench: BullMQ measured the way `ax bench throughput` measures ax
// (docs/benchmarks.md, "Comparing with another Redis queue, fairly"), so the
// two can be compared like for like in the same minutes.
//
// Phases (the names of ax's):
//
//   submit-single  -single jobs, Queue.add one per call from -single-conns
//                  concurrent callers
//   submit-batch   the rest of -n in Queue.addBulk calls of -batch from
//                  -submitters concurrent callers
//   drain          a Worker with -concurrency starts; timed until its
//                  'completed' events count all -n (in process, as ax counts)
//   submit+drain   -n more in addBulk calls while the worker drains; timed
//                  until 2×n completed
//   idle pickup    the worker idle, one job at a time, 300–700 ms apart:
//                  Queue.add call → processor start
//
// Per phase: jobs/s, Redis CPU (INFO cpu used_cpu_sys + used_cpu_user) and
// this process's CPU (process.cpuUsage: every thread of it), both per job.
// Completed jobs are kept (BullMQ's default, removeOnComplete false), as ax
// keeps every task 24 h.
//
// Usage: node bench.mjs [-n 200000] [-concurrency 256] [-o json] [-redis host:port]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const pkg = JSON.parse(readFileSync(new URL('./node_modules/bullmq/package.json', import.meta.url)));

function parseArgs(argv) {
  const o = {
    n: 200000, single: 20000, singleConns: 16, batch: 1000, submitters: 2, concurrency: 256,
    o: 'table', redis: '', redisServer: 'redis-server', idle: 10, appendonly: 'no',
  };
  const names = {
    '-n': ['n', Number], '-single': ['single', Number], '-single-conns': ['singleConns', Number],
    '-batch': ['batch', Number], '-submitters': ['submitters', Number],
    '-concurrency': ['concurrency', Number], '-o': ['o', String], '-redis': ['redis', String],
    '-redis-server': ['redisServer', String], '-idle': ['idle', Number],
    '-appendonly': ['appendonly', String],
  };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let v;
    if (a.startsWith('--')) a = a.slice(1);
    if (a.includes('=')) [a, v] = [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)];
    const d = names[a];
    if (!d) throw new Error(`unknown flag ${argv[i]}`);
    if (v === undefined) v = argv[++i];
    if (v === undefined) throw new Error(`flag ${a} needs a value`);
    const val = d[1](v);
    if (d[1] === Number && !Number.isFinite(val)) throw new Error(`flag ${a}: ${v} is not a number`);
    o[d[0]] = val;
  }
  if (o.o !== 'table' && o.o !== 'json') throw new Error(`-o ${o.o}: want table or json`);
  if (!['no', 'everysec', 'always'].includes(o.appendonly)) throw new Error(`-appendonly ${o.appendonly}: want no, everysec or always`);
  o.single = Math.max(0, Math.min(o.single, o.n));
  return o;
}

const round = (v, p) => Math.round(v * 10 ** p) / 10 ** p;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => process.stderr.write('bullmqbench: ' + a.join(' ') + '\n');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

// startServer starts a temporary redis-server with ax bench's configuration
// (appendonly as asked, save "", maxmemory-policy noeviction).
async function startServer(bin, appendonly) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bullmqbench-'));
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
    '--maxmemory-policy', 'noeviction', '--logfile', path.join(dir, 'redis.log')];
  if (appendonly === 'no') args.push('--appendonly', 'no');
  else args.push('--appendonly', 'yes', '--appendfsync', appendonly);
  const child = spawn(bin, args, { stdio: 'ignore' });
  let exited = false;
  child.on('exit', () => { exited = true; });
  child.on('error', (e) => { exited = true; log(`${bin}: ${e.message}`); });
  const stop = () => {
    if (!exited) child.kill('SIGTERM');
    try { rmSync(dir, { recursive: true, force: true }); } catch { /* gone */ }
  };
  process.on('exit', stop);
  for (const t0 = Date.now(); Date.now() - t0 < 5000;) {
    if (exited) { stop(); throw new Error(`${bin} exited (is Redis installed?)`); }
    const ok = await new Promise((r) => {
      const c = net.connect(port, '127.0.0.1', () => { c.end(); r(true); });
      c.on('error', () => r(false));
    });
    if (ok) return { addr: `127.0.0.1:${port}`, host: '127.0.0.1', port, stop };
    await sleep(20);
  }
  stop();
  throw new Error(`${bin} did not accept connections within 5s`);
}

function infoField(info, key) {
  for (const l of info.split('\r\n')) {
    const i = l.indexOf(':');
    if (i > 0 && l.slice(0, i) === key) return l.slice(i + 1);
  }
  return '';
}

async function redisCPU(r) {
  const s = await r.info('cpu');
  return (parseFloat(infoField(s, 'used_cpu_sys')) + parseFloat(infoField(s, 'used_cpu_user'))) * 1e6; // µs
}

async function commandStats(r) {
  const out = {};
  for (const l of (await r.info('commandstats')).split('\r\n')) {
    if (!l.startsWith('cmdstat_')) continue;
    const [name, rest] = l.slice(8).split(':');
    const kv = Object.fromEntries(rest.split(',').map((x) => x.split('=')));
    out[name] = { calls: Number(kv.calls), usec: Number(kv.usec) };
  }
  return out;
}

const procCPU = () => { const u = process.cpuUsage(); return u.user + u.system; }; // µs

async function startMeter(r) {
  return { t0: performance.now(), proc: procCPU(), redis: await redisCPU(r), cmds: await commandStats(r) };
}

async function stopMeter(r, m, name, tasks) {
  const wall = (performance.now() - m.t0) / 1000;
  const proc = procCPU() - m.proc;
  const red = (await redisCPU(r)) - m.redis;
  const cmds = await commandStats(r);
  const commands = Object.entries(cmds)
    .map(([c, s]) => ({ command: c, calls: s.calls - (m.cmds[c]?.calls ?? 0), usec: s.usec - (m.cmds[c]?.usec ?? 0) }))
    .filter((c) => c.calls > 0 && c.command !== 'info')
    .sort((a, b) => b.usec - a.usec).slice(0, 8)
    .map((c) => ({ ...c, usec_per_call: round(c.usec / c.calls, 2) }));
  const p = {
    name, tasks, wall_s: round(wall, 3), tasks_per_s: round(tasks / wall, 1),
    proc_cpu_s: round(proc / 1e6, 3), redis_cpu_s: round(red / 1e6, 3),
    proc_cpu_us_per_task: round(proc / tasks, 2), redis_cpu_us_per_task: round(red / tasks, 2),
    redis_commands: commands,
  };
  log(`${name.padEnd(13)} ${p.tasks_per_s.toFixed(0).padStart(8)} jobs/s  redis ${p.redis_cpu_us_per_task.toFixed(2).padStart(6)} µs/job  proc ${p.proc_cpu_us_per_task.toFixed(2).padStart(6)} µs/job`);
  return p;
}

// parallel runs conns callers of fn until it returns false.
async function parallel(conns, fn) {
  await Promise.all(Array.from({ length: Math.max(1, conns) }, async () => { while (await fn()); }));
}

const load1 = () => os.loadavg()[0];

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const started = new Date();
  const s = {
    tool: `bullmqbench (bullmq ${pkg.version}, node ${process.version})`, started: started.toISOString(),
    host: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? '', node: process.version, os: `${process.platform}/${process.arch}`, load1_before: load1() },
    redis: {}, params: { n: o.n, single: o.single, single_conns: o.singleConns, batch: o.batch, submitters: o.submitters, concurrency: o.concurrency, payload_bytes: 64, remove_on_complete: false },
    phases: [], counts: {}, notes: [],
  };
  let srv;
  let host, port;
  if (o.redis) {
    [host, port] = [o.redis.split(':')[0], Number(o.redis.split(':')[1])];
  } else {
    srv = await startServer(o.redisServer, o.appendonly);
    ({ host, port } = srv);
    log(`started a temporary redis-server on ${srv.addr} (appendonly ${o.appendonly})`);
  }
  s.redis = { addr: `${host}:${port}`, managed: !!srv };
  const r = new IORedis({ host, port, maxRetriesPerRequest: null });
  try {
    await r.flushall();
    s.redis.version = infoField(await r.info('server'), 'redis_version');
    const aof = await r.config('GET', 'appendonly');
    const fsync = await r.config('GET', 'appendfsync');
    s.redis.config = `appendonly ${aof[1]}${aof[1] === 'yes' ? ' appendfsync ' + fsync[1] : ''}${srv ? ', save "", maxmemory-policy noeviction (temporary)' : ' (external, flushed)'}`;
    const connection = { host, port, maxRetriesPerRequest: null };
    const queue = new Queue('bench', { connection });
    await queue.waitUntilReady();
    const data = { k: 'x'.repeat(56) }; // 64 B of JSON, as ax bench's payload

    // 1. One job per call.
    let next = 0;
    let m = await startMeter(r);
    await parallel(o.singleConns, async () => {
      if (next >= o.single) return false;
      next++;
      await queue.add('bench.noop', data);
      return true;
    });
    if (o.single > 0) s.phases.push(await stopMeter(r, m, 'submit-single', o.single));

    // 2. Batches.
    const bulk = async (n) => {
      let left = n;
      await parallel(o.submitters, async () => {
        if (left <= 0) return false;
        const k = Math.min(o.batch, left);
        left -= k;
        await queue.addBulk(Array.from({ length: k }, () => ({ name: 'bench.noop', data })));
        return true;
      });
    };
    const mem0 = Number(infoField(await r.info('memory'), 'used_memory'));
    m = await startMeter(r);
    await bulk(o.n - o.single);
    if (o.n - o.single > 0) s.phases.push(await stopMeter(r, m, 'submit-batch', o.n - o.single));
    s.redis_bytes_per_pending_task = round((Number(infoField(await r.info('memory'), 'used_memory')) - mem0) / Math.max(1, o.n - o.single), 1);

    // 3. Drain.
    let done = 0;
    let failed = 0;
    let idleStart = null;
    const await_ = (total, what) => new Promise((resolve, reject) => {
      let last = -1, lastMove = Date.now();
      const t = setInterval(() => {
        if (done >= total) { clearInterval(t); resolve(); return; }
        if (done !== last) { last = done; lastMove = Date.now(); } else if (Date.now() - lastMove > 30000) {
          clearInterval(t); reject(new Error(`${what}: no progress for 30s at ${done} of ${total}`));
        }
      }, 1);
    });
    m = await startMeter(r);
    const worker = new Worker('bench', async (job) => {
      if (job.name === 'bench.idle' && idleStart) idleStart(performance.now());
      return null;
    }, { connection, concurrency: o.concurrency, autorun: true });
    worker.on('completed', () => { done++; });
    worker.on('failed', () => { failed++; });
    worker.on('error', (e) => log('worker error:', e.message));
    await await_(o.n, 'drain');
    s.phases.push(await stopMeter(r, m, 'drain', o.n));

    // 4. Submit while draining.
    m = await startMeter(r);
    await Promise.all([bulk(o.n), await_(2 * o.n, 'submit+drain')]);
    s.phases.push(await stopMeter(r, m, 'submit+drain', o.n));

    // 5. Idle pickups.
    const idle = [];
    for (let i = 0; i < o.idle; i++) {
      await sleep(300 + 100 * (i % 5));
      const started = new Promise((resolve) => { idleStart = resolve; });
      const t0 = performance.now();
      await queue.add('bench.idle', data);
      const t1 = await Promise.race([started, sleep(10000).then(() => null)]);
      if (t1 === null) throw new Error('idle pickup: no processor start within 10s');
      idle.push(round(t1 - t0, 2));
      idleStart = null;
    }
    if (idle.length) {
      const sorted = [...idle].sort((a, b) => a - b);
      s.idle_pickup = { n: idle.length, p50_ms: sorted[(sorted.length - 1) >> 1], max_ms: sorted.at(-1), min_ms: sorted[0], samples_ms: idle };
      log(`idle pickup p50 ${s.idle_pickup.p50_ms} ms, max ${s.idle_pickup.max_ms} ms`);
    }
    await sleep(100); // the last completions
    const counts = await queue.getJobCounts('completed', 'failed', 'wait', 'active', 'delayed');
    s.counts = { enqueued: 2 * o.n + idle.length, completed_events: done, failed_events: failed, ...counts };
    if (counts.completed !== 2 * o.n + idle.length || failed) {
      s.notes.push(`completed ${counts.completed}, failed ${failed}: expected ${2 * o.n + idle.length} and 0`);
    }
    await worker.close();
    await queue.close();
  } finally {
    await r.quit().catch(() => {});
    srv?.stop();
  }
  s.host.load1_after = load1();
  s.took_s = round((Date.now() - started.getTime()) / 1000, 3);
  if (s.host.load1_before > s.host.cpus || s.host.load1_after > s.host.cpus) {
    s.notes.push(`load average ${s.host.load1_before.toFixed(1)} before, ${s.host.load1_after.toFixed(1)} after on ${s.host.cpus} CPUs: other jobs shared the machine`);
  }
  if (o.o === 'json') {
    process.stdout.write(JSON.stringify(s, null, 2) + '\n');
    return;
  }
  const w = (l) => process.stdout.write(l + '\n');
  w(`${s.tool}, ${s.started}`);
  w(`host: ${s.host.cpus} CPUs ${s.host.cpu_model}, load ${s.host.load1_before.toFixed(2)} before, ${s.host.load1_after.toFixed(2)} after`);
  w(`redis: ${s.redis.version} ${s.redis.addr} (${s.redis.config})`);
  w(`params: ${Object.entries(s.params).map(([k, v]) => `${k}=${v}`).join(' ')}\n`);
  w('phase          tasks   wall s   tasks/s  redis µs/task  proc µs/task');
  for (const p of s.phases) {
    w(`${p.name.padEnd(13)} ${String(p.tasks).padStart(6)} ${p.wall_s.toFixed(2).padStart(8)} ${p.tasks_per_s.toFixed(0).padStart(9)} ${p.redis_cpu_us_per_task.toFixed(2).padStart(14)} ${p.proc_cpu_us_per_task.toFixed(2).padStart(13)}`);
  }
  if (s.idle_pickup) w(`\nidle pickup (add → processor start, ${s.idle_pickup.n}): p50 ${s.idle_pickup.p50_ms} ms, max ${s.idle_pickup.max_ms} ms`);
  w(`redis memory per pending job: ${s.redis_bytes_per_pending_task} B`);
  w(`counts: ${Object.entries(s.counts).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  for (const n of s.notes) w(`note: ${n}`);
}

main().then(() => process.exit(0), (e) => { log(e.stack || e.message); process.exit(1); });
