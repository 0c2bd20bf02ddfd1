// Node.js driver change stream checks against a humongod replica set (run by e2e/run.sh):
//   node e2e/node_changestream.js "mongodb://h1,h2,h3/?replicaSet=rs0"
//
// Issue 15: a collection ChangeStream (fullDocument: updateLookup) sees an insert, an update
// with its updateDescription and looked-up document, a replace and a delete, in order; a
// transaction's two inserts come as two events with its lsid and txnNumber; a stream resumed
// with resumeAfter continues right after the token; a database stream ($match on
// operationType) sees only the inserts of every collection; drop ends the collection stream
// with invalidate; Mongoose's Model.watch() delivers an insert.
'use strict';
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

let current = 'connect';
async function step(name, fn) {
  current = name;
  await fn();
}

async function next(stream) {
  const ev = await Promise.race([
    stream.next(),
    new Promise((_, reject) => setTimeout(() => reject(new Error('no event within 20s')), 20000)),
  ]);
  return ev;
}

async function main() {
  const uri = process.argv[2];
  assert.ok(uri, 'usage: node node_changestream.js <replica-set uri>');
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 20000 });
  await client.connect();
  try {
    const db = client.db('e2e_node_cs');
    await db.dropDatabase();
    const coll = db.collection('items');
    const stream = coll.watch([], { fullDocument: 'updateLookup' });
    const dbStream = db.watch([{ $match: { operationType: 'insert' } }]);
    // The first getMore's postBatchResumeToken is there before any event.
    await step('open', async () => {
      assert.equal(await stream.tryNext(), null);
      assert.ok(stream.resumeToken, 'a resume token before the first event');
      assert.equal(await dbStream.tryNext(), null);
    });
    let afterInsert;
    await step('crud events', async () => {
      await coll.insertOne({ _id: 1, a: 1 });
      await coll.updateOne({ _id: 1 }, { $set: { b: 2 } });
      await coll.replaceOne({ _id: 1 }, { c: 3 });
      await coll.deleteOne({ _id: 1 });
      const ins = await next(stream);
      assert.equal(ins.operationType, 'insert');
      assert.deepEqual(ins.ns, { db: 'e2e_node_cs', coll: 'items' });
      assert.deepEqual(ins.documentKey, { _id: 1 });
      assert.deepEqual(ins.fullDocument, { _id: 1, a: 1 });
      afterInsert = ins._id;
      const upd = await next(stream);
      assert.equal(upd.operationType, 'update');
      assert.deepEqual(upd.updateDescription.updatedFields, { b: 2 });
      assert.deepEqual(upd.updateDescription.removedFields, []);
      assert.ok('fullDocument' in upd, 'updateLookup adds fullDocument');
      const rep = await next(stream);
      assert.equal(rep.operationType, 'replace');
      assert.deepEqual(rep.fullDocument, { _id: 1, c: 3 });
      const del = await next(stream);
      assert.equal(del.operationType, 'delete');
      assert.deepEqual(del.documentKey, { _id: 1 });
    });
    await step('transaction events', async () => {
      const session = client.startSession();
      try {
        await session.withTransaction(async () => {
          await coll.insertOne({ _id: 10 }, { session });
          await coll.insertOne({ _id: 11 }, { session });
        });
      } finally {
        await session.endSession();
      }
      const a = await next(stream);
      const b = await next(stream);
      assert.deepEqual([a.documentKey._id, b.documentKey._id], [10, 11]);
      assert.ok(a.lsid && a.txnNumber !== undefined, 'transaction events carry lsid and txnNumber');
      assert.ok(a.clusterTime.equals(b.clusterTime), 'one commit time');
    });
    await step('resumeAfter', async () => {
      const resumed = coll.watch([], { resumeAfter: afterInsert });
      const ev = await next(resumed);
      assert.equal(ev.operationType, 'update');
      await resumed.close();
    });
    await step('database stream', async () => {
      await db.collection('other').insertOne({ _id: 'o' });
      const seen = [];
      for (let i = 0; i < 4; i++) {
        const ev = await next(dbStream);
        assert.equal(ev.operationType, 'insert');
        seen.push(`${ev.ns.coll}:${ev.documentKey._id}`);
      }
      assert.deepEqual(seen, ['items:1', 'items:10', 'items:11', 'other:o']);
    });
    await step('drop and invalidate', async () => {
      await coll.drop();
      assert.equal((await next(stream)).operationType, 'drop');
      assert.equal((await next(stream)).operationType, 'invalidate');
    });
    await stream.close();
    await dbStream.close();
    await step('mongoose Model.watch', async () => {
      let mongoose;
      try {
        mongoose = require('mongoose');
      } catch (e) {
        console.log('node changestream: mongoose not installed, Model.watch skipped');
        return;
      }
      const conn = await mongoose.createConnection(uri, { dbName: 'e2e_node_cs', serverSelectionTimeoutMS: 20000 }).asPromise();
      try {
        const Item = conn.model('Widget', new mongoose.Schema({ name: String }));
        const w = Item.watch();
        const got = new Promise((resolve, reject) => {
          w.on('change', resolve);
          w.on('error', reject);
          setTimeout(() => reject(new Error('no Model.watch event within 20s')), 20000);
        });
        // Let the stream's aggregate run before the write.
        await new Promise((r) => setTimeout(r, 500));
        await Item.create({ name: 'gear' });
        const ev = await got;
        assert.equal(ev.operationType, 'insert');
        assert.equal(ev.fullDocument.name, 'gear');
        await w.close();
      } finally {
        await conn.close();
      }
    });
    await db.dropDatabase();
    console.log('node changestream: all checks passed');
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  console.error(`node changestream: step "${current}" failed:`, err);
  process.exit(1);
});
