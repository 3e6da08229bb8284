// The remote worker protocol's messages (docs/worker-protocol.md), as
// httpapi/openapi.json declares them (src/openapi.ts is generated from it).
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

export type Registration = Schemas["WorkerRegistered"];
export type ClaimedTask = Schemas["WorkerTask"];
export type ClaimAnswer = Schemas["WorkerClaimResponse"];
export type Held = Schemas["WorkerLease"];
export type Progress = Schemas["WorkerProgress"];
export type Report = Schemas["WorkerReport"];
export type ReportAnswer = Schemas["WorkerReportResponse"];
export type StopReason = Schemas["WorkerStop"]["reason"];

/** What became of a task, without which task it is (a WorkerOutcome by its status). */
export type Verdict =
  | { status: "success"; result?: unknown }
  | { status: "failure"; error: string; retry: boolean; retry_after_ms?: number }
  | { status: "return"; retry_after_ms?: number };

export type Outcome = Held & Verdict;

// Every Outcome is a WorkerOutcome: a compile error here means the wire changed.
const _outcomeIsWire = (o: Outcome): Schemas["WorkerOutcome"] => o;
void _outcomeIsWire;
