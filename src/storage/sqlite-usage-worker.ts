/**
 * Entry of the SQLite usage writer thread (see sqlite-usage-writer.ts). Kept to the connection
 * and the insert so the thread starts fast and never loads the rest of the gateway.
 */

import { parentPort, workerData } from 'node:worker_threads';
import { openSqlite } from './sqlite-connection.ts';
import { prepareUsageInsert } from './sqlite-usage-insert.ts';
import type { WriterInit, WriterReply, WriterRequest } from './sqlite-usage-writer.ts';

const port = parentPort;
if (port === null) throw new Error('sqlite-usage-worker runs only as a worker thread');

const { path, busyTimeoutMs } = workerData as WriterInit;
// Opening or preparing can fail (file removed, schema missing); the throw ends the thread and
// the main side rejects the batches it was sent.
const db = openSqlite(path, busyTimeoutMs);
const insert = prepareUsageInsert(db);

// Messages arrive in order and are handled one at a time, so batches commit in send order.
port.on('message', ({ id, batch }: WriterRequest) => {
  let reply: WriterReply;
  try {
    insert(batch);
    reply = { id };
  } catch (err) {
    const e = err as { message?: unknown; code?: unknown };
    reply = {
      id,
      error: {
        message: typeof e?.message === 'string' ? e.message : String(err),
        ...(typeof e?.code === 'string' ? { code: e.code } : {}),
      },
    };
  }
  port.postMessage(reply);
});
