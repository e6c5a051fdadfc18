// Hand in a final law through the simulator's public API, in Node.js, and
// fetch its scores: the whole external workflow in one script, using only the
// standard gRPC toolchain and lawlab's .proto files.
//
//   LAWLAB_SIMULATOR_ADDR=sim.example.org:443 LAWLAB_TOKEN=lawlab_... \
//   [LAWLAB_TLS_CA=ca.pem] [LAWLAB_PROTOS=../../protos] \
//   node submit.mjs TASK_ID SETTING law.py
//
// SETTING is real or parallel; a Parallel submission needs one experiment
// first, so this script runs one over the inputs' documented ranges. Prints one
// JSON object: the submission's state, whether its scores are released, and
// the scores (S_N and S_V for Real, S_S for Parallel) once they are.

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
const [taskId, settingName, lawFile] = process.argv.slice(2);
if (!taskId || !["real", "parallel"].includes(settingName) || !lawFile) {
  console.error("usage: node submit.mjs TASK_ID real|parallel law.py");
  process.exit(2);
}

const definition = protoLoader.loadSync("lawlab/simulator/v1/simulator.proto", {
  includeDirs: [protos], keepCase: true, longs: String, enums: String, defaults: true,
});
const { lawlab } = grpc.loadPackageDefinition(definition);
const credentials = caFile
  ? grpc.credentials.createSsl(readFileSync(caFile))
  : grpc.credentials.createInsecure();
const sim = new lawlab.simulator.v1.SimulatorService(address, credentials);

function call(method, request) {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  const deadline = new Date(Date.now() + 30_000);
  return new Promise((resolve, reject) => {
    sim[method](request, metadata, { deadline }, (err, response) =>
      err ? reject(err) : resolve(response));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

try {
  const setting = settingName === "parallel" ? "SETTING_PARALLEL" : "SETTING_REAL";
  const { task } = await call("GetTask", { task_id: taskId });
  const session = await call("OpenSession", { task_id: taskId, setting });
  if (setting === "SETTING_PARALLEL" && session.budget.calls_used === 0) {
    const inputs = {};
    for (const v of task.inputs) inputs[v.name] = { values: [v.min, (v.min + v.max) / 2, v.max] };
    const group_ids = task.type === "TASK_TYPE_MULTI_GROUP" ? Array(3).fill(task.group_ids[0]) : [];
    await call("Query", { session_id: session.session_id, request_id: randomUUID(), inputs,
                          group_ids, n_samples: task.caps.min_samples_per_point });
  }
  const request = { session_id: session.session_id, request_id: randomUUID(),
                    submission: { source: readFileSync(lawFile, "utf8") } };
  let status = await call("Submit", request);
  const retried = await call("Submit", request); // a retried upload: received once
  for (let i = 0; i < 300 && status.state === "SUBMISSION_STATE_QUEUED"; i++) {
    await sleep(1000);
    status = await call("GetSubmission", { submission_id: status.submission_id });
  }
  // the setting's scores, once released (Real: S_N and S_V; Parallel: S_S)
  const scores = {};
  if (status.released) {
    for (const name of settingName === "real" ? ["s_n", "s_v"] : ["s_s"]) {
      scores[name] = status.scores[name];
    }
  }
  console.log(JSON.stringify({
    submission_id: status.submission_id, task_id: status.task_id, epoch: status.epoch,
    state: status.state, released: status.released, release: status.release, scores,
    replayed_on_retry: retried.replayed, message: status.message,
  }));
} catch (err) {
  console.error(`simulator call failed: ${grpc.status[err.code] ?? err.code}: ${err.details ?? err.message}`);
  process.exitCode = 1;
} finally {
  sim.close();
}
