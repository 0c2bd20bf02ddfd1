// mongosh CRUD smoke test against humongod (run by e2e/run.sh):
//   mongosh "mongodb://127.0.0.1:PORT/e2e_mongosh" --quiet --file e2e/mongosh_smoke.js
// Every step asserts its result; any failure exits non-zero.
function check(cond, what, got) {
  if (!cond) {
    throw new Error('mongosh smoke: ' + what + (got === undefined ? '' : ': got ' + EJSON.stringify(got)));
  }
}

try {
  db = db.getSiblingDB('e2e_mongosh');
  db.dropDatabase();
  const c = db.items;

  const ins = c.insertMany([
    { _id: 1, name: 'apple', qty: 5, tags: ['fruit'] },
    { _id: 2, name: 'banana', qty: 12, tags: ['fruit', 'yellow'] },
    { _id: 3, name: 'carrot', qty: 7, tags: ['vegetable'] },
    { _id: 4, name: 'date', qty: 20, tags: ['fruit'] },
  ]);
  check(ins.acknowledged && Object.keys(ins.insertedIds).length === 4, 'insertMany', ins);

  const found = c.find({ tags: 'fruit' }).sort({ qty: -1 }).limit(2).toArray();
  check(found.length === 2 && found[0]._id === 4 && found[1]._id === 2, 'find filter/sort/limit', found);
  const proj = c.findOne({ _id: 3 }, { name: 1, _id: 0 });
  check(proj && proj.name === 'carrot' && Object.keys(proj).length === 1, 'findOne with projection', proj);

  let up = c.updateOne({ _id: 1 }, { $set: { color: 'red' }, $inc: { qty: 10 } });
  check(up.matchedCount === 1 && up.modifiedCount === 1, 'updateOne $set/$inc', up);
  const apple = c.findOne({ _id: 1 });
  check(apple.qty === 15 && apple.color === 'red', 'updated document', apple);

  up = c.updateOne({ name: 'eggplant' }, { $set: { qty: 1 } }, { upsert: true });
  // mongosh reports the upserted _id as insertedId.
  const upId = up.upsertedId ?? up.insertedId;
  check(up.upsertedCount === 1 && up.matchedCount === 0 && upId, 'upsert', up);
  const egg = c.findOne({ _id: upId });
  check(egg && egg.name === 'eggplant' && egg.qty === 1, 'upserted document seeded from the query', egg);

  const cnt = c.count({ tags: 'fruit' }); // the count command
  check(cnt === 3, 'count', cnt);
  check(c.estimatedDocumentCount() === 5, 'estimatedDocumentCount', c.estimatedDocumentCount());

  const del = c.deleteMany({ qty: { $lt: 10 } });
  check(del.deletedCount === 2, 'deleteMany', del);
  check(c.count() === 3, 'count after deleteMany', c.count());

  const idx = c.createIndex({ name: 1 }, { unique: true });
  check(idx === 'name_1', 'createIndex', idx);
  check(c.getIndexes().some(i => i.name === 'name_1' && i.unique === true), 'getIndexes', c.getIndexes());
  let dupCode = null;
  try {
    c.insertOne({ name: 'banana' });
  } catch (e) {
    dupCode = e.code;
  }
  check(dupCode === 11000, 'unique index violation code', dupCode);

  const names = db.getCollectionNames();
  check(names.length === 1 && names[0] === 'items', 'getCollectionNames', names);
  check(c.drop() === true, 'drop');
  db.dropDatabase();
  print('mongosh smoke: all checks passed');
} catch (e) {
  print(String(e && e.stack || e));
  quit(1);
}
