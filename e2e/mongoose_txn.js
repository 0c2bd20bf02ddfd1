// Mongoose transaction checks against a humongod replica set (run by e2e/run.sh):
//   node e2e/mongoose_txn.js "mongodb://h1,h2,h3/?replicaSet=rs0"
//
// Connection.transaction (Mongoose 8: session.withTransaction with document state reset on
// abort): a committed transfer made of Model.updateOne and a document's save({session})
// (inside, the transaction reads its own writes and a read outside it still sees the old
// state), then a transaction whose callback throws after an insert (Model.create) and a save:
// nothing is left behind, and the saved document is new again, as Mongoose promises; and an
// explicit session.startTransaction/abortTransaction. Every result is asserted; any failure
// exits non-zero and names the step that failed.
'use strict';
const assert = require('node:assert/strict');
const mongoose = require('mongoose');

let current = 'connect';
async function step(name, fn) {
  current = name;
  await fn();
}

const Account = mongoose.model('Account', new mongoose.Schema({
  _id: String,
  balance: { type: Number, required: true, min: -1000000 },
}));

async function balances() {
  const out = {};
  for (const d of await Account.find().sort({ _id: 1 }).lean()) out[d._id] = d.balance;
  return out;
}

const txnOptions = { readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } };

async function main() {
  const uri = process.argv[2];
  assert.ok(uri, 'usage: node mongoose_txn.js <replica-set uri>');
  await mongoose.connect(uri, { dbName: 'e2e_mongoose_txn', serverSelectionTimeoutMS: 20000 });
  try {
    const conn = mongoose.connection;
    await step('setup', async () => {
      await conn.dropDatabase();
      // Created outside any transaction, majority-committed.
      await Account.createCollection();
      await Account.insertMany([{ _id: 'alice', balance: 100 }, { _id: 'bob', balance: 0 }],
        { writeConcern: { w: 'majority' } });
    });

    await step('connection.transaction commit', async () => {
      const res = await conn.transaction(async (session) => {
        await Account.updateOne({ _id: 'alice' }, { $inc: { balance: -30 } }, { session });
        const bob = await Account.findById('bob').session(session);
        bob.balance += 30;
        await bob.save({ session });
        assert.equal((await Account.findById('alice').session(session).lean()).balance, 70,
          'the transaction reads its own write');
        assert.deepEqual(await balances(), { alice: 100, bob: 0 }, 'a read outside sees nothing before the commit');
        return 'moved';
      }, txnOptions);
      assert.equal(res, 'moved');
      assert.deepEqual(await balances(), { alice: 70, bob: 30 });
    });

    await step('connection.transaction abort on throw', async () => {
      const erin = new Account({ _id: 'erin', balance: 1 });
      await assert.rejects(conn.transaction(async (session) => {
        await Account.create([{ _id: 'carol', balance: 1000 }], { session });
        await Account.updateOne({ _id: 'alice' }, { $inc: { balance: -1000 } }, { session });
        await erin.save({ session });
        assert.equal(erin.isNew, false);
        throw new Error('boom');
      }, txnOptions), /boom/);
      assert.deepEqual(await balances(), { alice: 70, bob: 30 }, 'an aborted transaction leaves nothing behind');
      assert.equal(erin.isNew, true, 'Mongoose resets a document saved in an aborted transaction');
      // So saving it again outside a transaction inserts it.
      await erin.save();
      assert.deepEqual(await balances(), { alice: 70, bob: 30, erin: 1 });
    });

    await step('explicit abortTransaction', async () => {
      const session = await conn.startSession();
      try {
        session.startTransaction(txnOptions);
        await Account.create([{ _id: 'dave', balance: 5 }], { session });
        await Account.updateOne({ _id: 'bob' }, { $set: { balance: -1 } }, { session });
        assert.equal(await Account.countDocuments().session(session), 4);
        assert.equal(await Account.findById('dave'), null, 'invisible outside before the commit');
        await session.abortTransaction();
      } finally {
        await session.endSession();
      }
      assert.deepEqual(await balances(), { alice: 70, bob: 30, erin: 1 });
    });

    await conn.dropDatabase();
    console.log('mongoose txn: all checks passed');
  } finally {
    await mongoose.disconnect();
  }
}

main().catch((err) => {
  console.error(`mongoose txn: step "${current}" failed:`, err);
  process.exit(1);
});
