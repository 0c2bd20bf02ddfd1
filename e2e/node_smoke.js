// Node.js driver smoke test against humongod (run by e2e/run.sh):
//   node e2e/node_smoke.js mongodb://127.0.0.1:PORT
'use strict';
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

async function main() {
  const uri = process.argv[2];
  assert.ok(uri, 'usage: node node_smoke.js <uri>');
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10000, directConnection: true });
  await client.connect();
  try {
    const db = client.db('e2e_node');
    await db.dropDatabase();
    const c = db.collection('items');

    const ins = await c.insertMany([
      { sku: 'a', qty: 5, tags: ['x'] },
      { sku: 'b', qty: 12, tags: ['x', 'y'] },
      { sku: 'c', qty: 7, tags: ['y'] },
      { sku: 'd', qty: 20, tags: ['x'] },
    ]);
    assert.equal(ins.insertedCount, 4);
    assert.equal(Object.values(ins.insertedIds)[0]._bsontype, 'ObjectId');

    const found = await c.find({ tags: 'x' }, { projection: { _id: 0, sku: 1, qty: 1 } })
      .sort({ qty: -1 }).limit(2).toArray();
    assert.deepEqual(found, [{ sku: 'd', qty: 20 }, { sku: 'b', qty: 12 }]);

    // A cursor across getMore batches.
    await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ sku: 'bulk' + i, n: i })));
    let seen = 0;
    for await (const doc of c.find({ n: { $gte: 0 } }).sort({ n: 1 }).batchSize(50)) {
      assert.equal(doc.n, seen);
      seen++;
    }
    assert.equal(seen, 300);
    // A streaming (unsorted) filtered cursor across getMores.
    let multiples = 0;
    for await (const doc of c.find({ n: { $mod: [3, 0] } }).batchSize(10)) {
      assert.equal(doc.n % 3, 0);
      multiples++;
    }
    assert.equal(multiples, 100);
    assert.equal((await c.deleteMany({ n: { $exists: true } })).deletedCount, 300);

    let up = await c.updateOne({ sku: 'a' }, { $set: { color: 'red' }, $inc: { qty: 10 } });
    assert.equal(up.matchedCount, 1);
    assert.equal(up.modifiedCount, 1);
    const a = await c.findOne({ sku: 'a' });
    assert.equal(a.qty, 15);
    assert.equal(a.color, 'red');

    up = await c.updateOne({ sku: 'e' }, { $set: { qty: 1 } }, { upsert: true });
    assert.equal(up.upsertedCount, 1);
    const e = await c.findOne({ _id: up.upsertedId });
    assert.equal(e.sku, 'e');

    const fam = await c.findOneAndUpdate({ sku: 'e' }, { $inc: { qty: 1 } }, { returnDocument: 'after' });
    assert.equal(fam.qty, 2);

    // The count command (countDocuments would need the aggregate command).
    const cnt = await db.command({ count: 'items', query: { tags: 'x' } });
    assert.equal(cnt.n, 3);
    assert.equal(await c.estimatedDocumentCount(), 5);

    const del = await c.deleteMany({ qty: { $lt: 10 } });
    assert.equal(del.deletedCount, 2);

    assert.equal(await c.createIndex({ sku: 1 }, { unique: true }), 'sku_1');
    const idx = await c.indexes();
    assert.ok(idx.some((i) => i.name === 'sku_1' && i.unique === true), JSON.stringify(idx));
    await assert.rejects(c.insertOne({ sku: 'b' }), (err) => err.code === 11000);

    assert.equal(await c.drop(), true);
    await db.dropDatabase();
    console.log('node smoke: all checks passed');
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  console.error('node smoke FAILED:', err);
  process.exit(1);
});
