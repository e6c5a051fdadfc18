// A worked Parallel session against the lawlab simulator, in Node.js, using
// only the standard gRPC toolchain (@grpc/grpc-js + @grpc/proto-loader) and
// lawlab's .proto files.
//
//   LAWLAB_SIMULATOR_ADDR=127.0.0.1:50051 LAWLAB_TOKEN=lawlab_... \
//   [LAWLAB_TLS_CA=var/certs/server.pem] [LAWLAB_PROTOS=../../protos] \
//   node session.mjs [task_id]
//
// Prints one JSON object: the task, the session, the observations of one
// experiment and the budget after it.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const here = dirname(fileURLToPath(import.meta.url));
const protos = process.env.LAWLAB_PROTOS ?? join(here, "..", "..", "protos");
const address = process.env.LAWLAB_SIMULATOR_ADDR ?? "127.0.0.1:50051";
const token = process.env.LAWLAB_TOKEN ?? "";
const caFile = process.env.LAWLAB_TLS_CA;
const taskId = process.argv[2] ?? "mercury_vapour_pressure";

const definition = protoLoader.loadSync("lawlab/simulator/v1/simulator.proto", {
  includeDirs: [protos],
  keepCase: true,      // field names exactly as in the .proto
  longs: String,       // 64-bit integers arrive as strings
  enums: String,       // enums by name, e.g. "SETTING_PARALLEL"
  defaults: true,
});
const { lawlab } = grpc.loadPackageDefinition(definition);

const channelCredentials = caFile
  ? grpc.credentials.createSsl(readFileSync(caFile))
  : grpc.credentials.createInsecure();
const sim = new lawlab.simulator.v1.SimulatorService(address, channelCredentials);

// Every call carries the team's token as gRPC metadata.
function call(method, request) {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  const deadline = new Date(Date.now() + 10_000);
  return new Promise((resolve, reject) => {
    sim[method](request, metadata, { deadline }, (err, response) =>
      err ? reject(err) : resolve(response));
  });
}

let session;
try {
  const { task } = await call("GetTask", { task_id: taskId });
  // a handle on the team's budget for this task and epoch (reopening continues it)
  session = await call("OpenSession", { task_id: taskId, setting: "SETTING_PARALLEL" });

  // Three points spread over each input's documented range; group ids for Type II.
  const inputs = {};
  for (const v of task.inputs) {
    const lo = v.min, hi = v.max;
    inputs[v.name] = { values: [lo, (lo + hi) / 2, hi] };
  }
  const group_ids = task.type === "TASK_TYPE_MULTI_GROUP" ? Array(3).fill(task.group_ids[0]) : [];
  const request = { session_id: session.session_id, request_id: randomUUID(), inputs, group_ids,
                    n_samples: task.caps.min_samples_per_point };
  const first = await call("Query", request);
  const retried = await call("Query", request); // same request id: same data, charged once
  const status = await call("GetSession", { session_id: session.session_id });

  const column = (name) => first.observations.columns.find((c) => c.name === name).values;
  console.log(JSON.stringify({
    task_id: task.task_id,
    target: task.target.name,
    session_id: session.session_id,
    observations: column(task.target.name),
    clipped: first.clipped,
    replayed_on_retry: retried.replayed,
    same_on_retry: JSON.stringify(retried.observations) === JSON.stringify(first.observations),
    calls_used: status.budget.calls_used,
    calls_max: status.budget.calls_max,
  }));
} catch (err) {
  console.error(`simulator call failed: ${grpc.status[err.code] ?? err.code}: ${err.details ?? err.message}`);
  process.exitCode = 1;
} finally {
  if (session) await call("CloseSession", { session_id: session.session_id }).catch(() => {});
  sim.close();
}
