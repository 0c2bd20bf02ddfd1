// mongosh watch() checks against a humongod replica set (run by e2e/run.sh with the set's URI).
// Issue 15: db.coll.watch() with tryNext() sees an insert and an update (updateLookup), and a
// stream resumed with startAfter its first event's token sees the update first; db.watch()
// sees the same insert.
function eq(got, want, what) {
  const g = EJSON.stringify(got), w = EJSON.stringify(want);
  if (g !== w) throw new Error(`${what || 'value'}: got ${g}, want ${w}`);
}

const d = db.getSiblingDB('e2e_mongosh_cs');
d.dropDatabase();
const c = d.items;

function nextEvent(cs) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const ev = cs.tryNext();
    if (ev !== null) return ev;
    if (Date.now() > deadline) throw new Error('no change event within 20s');
  }
}

const cs = c.watch([], { fullDocument: 'updateLookup' });
const dbcs = d.watch();
eq(cs.tryNext(), null);
c.insertOne({ _id: 1, n: 'one' });
c.updateOne({ _id: 1 }, { $set: { n: 'uno' } });
const ins = nextEvent(cs);
eq(ins.operationType, 'insert');
eq(ins.fullDocument, { _id: 1, n: 'one' });
const upd = nextEvent(cs);
eq(upd.operationType, 'update');
eq(upd.updateDescription.updatedFields, { n: 'uno' });
eq(upd.fullDocument, { _id: 1, n: 'uno' });
const again = c.watch([], { startAfter: ins._id });
eq(nextEvent(again).operationType, 'update');
again.close();
const dins = nextEvent(dbcs);
eq(dins.operationType, 'insert');
eq(dins.ns, { db: 'e2e_mongosh_cs', coll: 'items' });
cs.close();
dbcs.close();
d.dropDatabase();
print('mongosh changestream: all checks passed');
