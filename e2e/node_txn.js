// Node.js driver transaction checks against a humongod replica set (run by e2e/run.sh):
//   node e2e/node_txn.js "mongodb://h1,h2,h3/?replicaSet=rs0"
//
// ClientSession.withTransaction (issue 11, "Drivers' session semantics"): a committed transfer
// between two documents (the callback's return value comes back; inside, the transaction reads
// its own writes and a read outside still sees the old state); a callback that throws and an
// explicit abortTransaction leave nothing behind; and a write conflict with another open
// transaction (WriteConflict, label TransientTransactionError) makes withTransaction retry the
// callback until the other transaction commits, after which both transfers are applied once.
'use strict';
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

let current = 'connect';
async function step(name, fn) {
  current = name;
  await fn();
}

async function balances(coll) {
  const out = {};
  for (const d of await coll.find().sort({ _id: 1 }).toArray()) out[d._id] = d.balance;
  return out;
}

const txnOptions = { readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } };

async function main() {
  const uri = process.argv[2];
  assert.ok(uri, 'usage: node node_txn.js <replica-set uri>');
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 20000 });
  await client.connect();
  try {
    const db = client.db('e2e_node_txn');
    await db.dropDatabase();
    const accounts = db.collection('accounts');
    await accounts.insertMany([{ _id: 'alice', balance: 100 }, { _id: 'bob', balance: 0 }],
      { writeConcern: { w: 'majority' } });
    const session = client.startSession();
    try {
      await step('withTransaction commit', async () => {
        let attempts = 0;
        const ret = await session.withTransaction(async () => {
          attempts++;
          await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -30 } }, { session });
          await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 30 } }, { session });
          assert.equal((await accounts.findOne({ _id: 'alice' }, { session })).balance, 70,
            'the transaction reads its own write');
          assert.deepEqual(await balances(accounts), { alice: 100, bob: 0 },
            'a read outside sees nothing before the commit');
          return 'moved';
        }, txnOptions);
        assert.equal(ret, 'moved', "withTransaction returns the callback's value");
        assert.equal(attempts, 1);
        assert.deepEqual(await balances(accounts), { alice: 70, bob: 30 });
      });

      await step('withTransaction abort on throw', async () => {
        await assert.rejects(session.withTransaction(async () => {
          await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -1000 } }, { session });
          await accounts.insertOne({ _id: 'carol', balance: 1000 }, { session });
          throw new Error('boom');
        }, txnOptions), /boom/);
        assert.deepEqual(await balances(accounts), { alice: 70, bob: 30 },
          'an aborted transaction leaves nothing behind');
      });

      await step('explicit abortTransaction', async () => {
        session.startTransaction(txnOptions);
        await accounts.insertOne({ _id: 'dave', balance: 5 }, { session });
        await accounts.updateOne({ _id: 'bob' }, { $set: { balance: -1 } }, { session });
        assert.equal(await accounts.countDocuments({}, { session }), 3);
        assert.equal(await accounts.findOne({ _id: 'dave' }), null, 'invisible outside before the commit');
        await session.abortTransaction();
        assert.deepEqual(await balances(accounts), { alice: 70, bob: 30 });
      });

      await step('write conflict retried by withTransaction', async () => {
        // Another session's open transaction updates alice first; our transaction's update of
        // alice conflicts (first updater wins) until that one commits.
        const other = client.startSession();
        try {
          other.startTransaction(txnOptions);
          await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -5 } }, { session: other });
          let attempts = 0;
          let sawTransient = false;
          const ours = session.withTransaction(async () => {
            attempts++;
            try {
              await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -7 } }, { session });
            } catch (e) {
              if (e.hasErrorLabel && e.hasErrorLabel('TransientTransactionError')) sawTransient = true;
              throw e;
            }
            await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 7 } }, { session });
          }, txnOptions).then(() => null, (e) => e); // settled, so a failure is not unhandled meanwhile
          // Let ours meet the conflict at least once, then commit the other.
          for (let i = 0; i < 200 && attempts === 0; i++) await new Promise((r) => setTimeout(r, 10));
          await new Promise((r) => setTimeout(r, 200));
          await other.commitTransaction();
          const oursErr = await ours;
          if (oursErr) throw oursErr;
          assert.ok(sawTransient, `a TransientTransactionError was seen (attempts ${attempts})`);
          assert.ok(attempts >= 2, `the callback was retried (attempts ${attempts})`);
        } finally {
          await other.endSession();
        }
        assert.deepEqual(await balances(accounts), { alice: 58, bob: 37 }, 'both transfers applied exactly once');
      });
    } finally {
      await session.endSession();
    }
    await db.dropDatabase();
    console.log('node txn: all checks passed');
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  console.error(`node txn: step "${current}" failed:`, err);
  process.exit(1);
});
