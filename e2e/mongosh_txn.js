// mongosh transaction checks against a humongod replica set (run by e2e/run.sh):
//   mongosh "mongodb://h1,h2,h3/?replicaSet=rs0" --quiet --file e2e/mongosh_txn.js
// session.withTransaction moves money between two documents: inside, the transaction reads its
// own writes while a read outside it still sees the old balances; after the commit both
// changes are visible together. A callback that throws, and an explicit abortTransaction,
// leave nothing behind (neither the updates nor an insert). Every step asserts its result;
// any failure exits non-zero.
function check(cond, what, got) {
  if (!cond) {
    throw new Error('mongosh txn: ' + what + (got === undefined ? '' : ': got ' + EJSON.stringify(got)));
  }
}

function balances(coll) {
  const out = {};
  coll.find().sort({ _id: 1 }).forEach((d) => { out[d._id] = d.balance; });
  return out;
}

try {
  const dbName = 'e2e_mongosh_txn';
  db = db.getSiblingDB(dbName);
  db.dropDatabase();
  // The collection exists before any transaction (and is majority-committed): the checks are
  // about the transactions' writes, not about DDL.
  db.accounts.insertMany([{ _id: 'alice', balance: 100 }, { _id: 'bob', balance: 0 }],
    { writeConcern: { w: 'majority' } });

  const session = db.getMongo().startSession();
  const accounts = session.getDatabase(dbName).accounts;

  // 1. A committed transfer.
  let attempts = 0;
  session.withTransaction(async () => {
    attempts++;
    await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -30 } });
    await accounts.updateOne({ _id: 'bob' }, { $inc: { balance: 30 } });
    const inside = await accounts.findOne({ _id: 'alice' });
    check(inside.balance === 70, 'the transaction reads its own write', inside);
    // balances is a shell function whose cursor calls return promises here, inside an
    // explicitly async function: awaited, as mongosh does not await implicitly in one.
    const outside = await balances(db.accounts);
    check(outside.alice === 100 && outside.bob === 0, 'a read outside sees nothing before the commit', outside);
  }, { writeConcern: { w: 'majority' }, readConcern: { level: 'snapshot' } });
  check(attempts === 1, 'one attempt without conflicts', attempts);
  let b = balances(db.accounts);
  check(b.alice === 70 && b.bob === 30, 'both updates visible after the commit', b);

  // 2. A callback that throws: withTransaction aborts and rethrows; nothing is left behind.
  let thrown = null;
  try {
    session.withTransaction(async () => {
      await accounts.updateOne({ _id: 'alice' }, { $inc: { balance: -1000 } });
      await accounts.insertOne({ _id: 'carol', balance: 1000 });
      throw new Error('boom');
    });
  } catch (e) {
    thrown = e;
  }
  check(thrown && String(thrown.message).includes('boom'), 'the callback error is rethrown', String(thrown));
  b = balances(db.accounts);
  check(b.alice === 70 && b.bob === 30 && !('carol' in b), 'an aborted transaction leaves nothing behind', b);

  // 3. Explicit startTransaction / abortTransaction.
  session.startTransaction({ readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } });
  accounts.updateOne({ _id: 'bob' }, { $set: { balance: -1 } });
  accounts.insertOne({ _id: 'dave', balance: 5 });
  check(accounts.countDocuments({}) === 3, 'the open transaction sees its insert', accounts.countDocuments({}));
  check(db.accounts.findOne({ _id: 'dave' }) === null, 'the insert is invisible outside before the commit');
  session.abortTransaction();
  b = balances(db.accounts);
  check(b.alice === 70 && b.bob === 30 && !('dave' in b), 'abortTransaction leaves nothing behind', b);

  // 4. Explicit commit.
  session.startTransaction({ writeConcern: { w: 'majority' } });
  accounts.insertOne({ _id: 'erin', balance: 0 });
  accounts.updateOne({ _id: 'bob' }, { $inc: { balance: -10 } });
  accounts.updateOne({ _id: 'erin' }, { $inc: { balance: 10 } });
  session.commitTransaction();
  b = balances(db.accounts);
  check(b.alice === 70 && b.bob === 20 && b.erin === 10, 'commitTransaction makes every write visible', b);
  check(b.alice + b.bob + b.erin === 100, 'money is conserved', b);

  session.endSession();
  db.dropDatabase();
  print('mongosh txn: all checks passed');
} catch (e) {
  print(String(e && e.stack || e));
  quit(1);
}
