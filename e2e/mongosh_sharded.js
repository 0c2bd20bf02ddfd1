// mongosh against a sharded cluster through humongos (run by e2e/run.sh, after
// `humongo up --shards 2`):
//   mongosh "mongodb://127.0.0.1:<router port>" --quiet --file e2e/mongosh_sharded.js
// sh.enableSharding and sh.shardCollection (a hashed and a ranged key), inserts, finds (by
// shard key and scatter-gather, sorted), an aggregation, sh.status() and
// db.coll.getShardDistribution(): the mongosh helpers read config.* through the router and
// the hashed collection's data really is spread over both shards (the ranged one's chunks stay
// on the primary shard until migrations exist). Every step asserts its result; any failure
// exits non-zero.
function check(cond, what, got) {
  if (!cond) {
    throw new Error('mongosh sharded: ' + what + (got === undefined ? '' : ': got ' + EJSON.stringify(got)));
  }
}

try {
  const dbName = 'e2e_sharded';
  db = db.getSiblingDB(dbName);
  const shards = db.adminCommand({ listShards: 1 }).shards;
  check(shards.length === 2, 'two shards', shards);

  check(sh.enableSharding(dbName).ok === 1, 'sh.enableSharding');
  const hashed = sh.shardCollection(dbName + '.users', { _id: 'hashed' });
  check(hashed.ok === 1, 'sh.shardCollection hashed', hashed);
  const ranged = sh.shardCollection(dbName + '.orders', { region: 1, _id: 1 });
  check(ranged.ok === 1, 'sh.shardCollection ranged', ranged);
  // Split the ranged collection at region "m" (sh.splitAt sends split with middle): the split
  // alone must show in the chunk list (the chunk moves at the end).
  check(sh.splitAt(dbName + '.orders', { region: 'm', _id: MinKey }).ok === 1, 'sh.splitAt');

  const users = [];
  for (let i = 0; i < 1000; i++) {
    users.push({ _id: i, name: 'user' + i, age: 18 + (i % 60), city: ['oslo', 'rome', 'lima', 'kyiv'][i % 4] });
  }
  check(db.users.insertMany(users).insertedIds[999] === 999, 'insertMany 1000 users');
  const orders = [];
  for (let i = 0; i < 200; i++) {
    orders.push({ _id: i, region: ['asia', 'europe', 'north', 'south'][i % 4], total: i * 3 });
  }
  db.orders.insertMany(orders);

  // Finds: by shard key (one shard), scatter-gather sorted with a limit, a count.
  check(db.users.findOne({ _id: 123 }).name === 'user123', 'findOne by shard key');
  const want = users.filter((u) => u.city === 'rome').sort((a, b) => b.age - a.age || a._id - b._id).slice(0, 3);
  const oldest = db.users.find({ city: 'rome' }).sort({ age: -1, _id: 1 }).limit(3).toArray();
  check(EJSON.stringify(oldest) === EJSON.stringify(want), 'sorted scatter-gather find', oldest);
  const old = users.filter((u) => u.age >= 70).length;
  check(db.users.countDocuments({ age: { $gte: 70 } }) === old, 'countDocuments', old);
  const all = db.users.find({}, { _id: 1 }).batchSize(7).toArray();
  check(all.length === 1000, 'a full scan in small batches', all.length);

  // An aggregation split over the shards.
  const byCity = db.users.aggregate([
    { $group: { _id: '$city', n: { $sum: 1 }, avgAge: { $avg: '$age' } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  check(byCity.length === 4 && byCity.every((g) => g.n === 250), 'aggregate $group over shards', byCity);
  const north = db.orders.aggregate([{ $match: { region: 'north' } }, { $count: 'n' }]).toArray();
  check(north.length === 1 && north[0].n === 50, 'aggregate targeted by range', north);

  // Updates and deletes by shard key and multi.
  check(db.users.updateOne({ _id: 5 }, { $set: { vip: true } }).modifiedCount === 1, 'updateOne by shard key');
  check(db.users.updateMany({ city: 'lima' }, { $inc: { age: 1 } }).modifiedCount === 250, 'updateMany broadcast');
  check(db.users.deleteMany({ age: { $gt: 76 } }).deletedCount > 0, 'deleteMany broadcast');

  // The data is on both shards: the hashed collection's chunks cover both.
  const chunks = db.getSiblingDB('config').chunks.aggregate([
    { $lookup: { from: 'collections', localField: 'uuid', foreignField: 'uuid', as: 'c' } },
    { $match: { 'c._id': dbName + '.users' } },
    { $group: { _id: '$shard', n: { $sum: 1 } } },
  ]).toArray();
  check(chunks.length === 2, 'hashed chunks on both shards', chunks);
  const orderChunks = db.getSiblingDB('config').chunks.countDocuments({
    uuid: db.getSiblingDB('config').collections.findOne({ _id: dbName + '.orders' }).uuid,
  });
  check(orderChunks === 2, 'the split made two chunks', orderChunks);

  // sh.status() reads config.* (and balancerStatus, $shardedDataDistribution) through the
  // router: both shards, the database and its two sharded collections with their chunks.
  const status = sh.status().value;
  check(status.shards.length === 2, 'sh.status shards', status.shards);
  const dbStatus = status.databases.find((d) => d.database._id === dbName);
  check(dbStatus !== undefined, 'sh.status lists the database', status.databases);
  const usersStatus = dbStatus.collections[dbName + '.users'];
  const ordersStatus = dbStatus.collections[dbName + '.orders'];
  check(usersStatus !== undefined && ordersStatus !== undefined, 'sh.status lists both collections', dbStatus);
  check(usersStatus.chunkMetadata.length === 2, 'sh.status: the hashed chunks on both shards', usersStatus.chunkMetadata);
  check(EJSON.stringify(ordersStatus.shardKey) === EJSON.stringify({ region: 1, _id: 1 }) && ordersStatus.chunks.length === 2,
    'sh.status: the ranged key and its two chunks', ordersStatus);
  check(status.balancer['Currently running'] === 'no', 'sh.status: balancerStatus answered', status.balancer);
  // $shardedDataDistribution (mongosh shows undefined when it fails): the hashed collection's
  // documents, owned by both shards.
  const remaining = db.users.countDocuments({});
  const usersData = (status.shardedDataDistribution || []).find((c) => c.ns === dbName + '.users');
  check(usersData !== undefined && usersData.shards.length === 2 &&
    usersData.shards.every((s) => s.numOwnedDocuments > 0 && s.numOrphanedDocs === 0) &&
    usersData.shards.reduce((n, s) => n + s.numOwnedDocuments, 0) === remaining,
    'sh.status: shardedDataDistribution', status.shardedDataDistribution);

  // getShardDistribution() runs $collStats with storageStats through the router (one document
  // per shard, each naming its shard) and counts config.chunks: every document and chunk is
  // accounted for, on both shards.
  const dist = db.users.getShardDistribution().value;
  const perShard = Object.keys(dist).filter((k) => k.startsWith('Shard '));
  check(perShard.length === 2 && perShard.every((k) => dist[k].docs > 0), 'getShardDistribution: docs on both shards', dist);
  check(dist.Totals.docs === remaining && dist.Totals.chunks === 4, 'getShardDistribution totals', dist.Totals);
  const ordersDist = db.orders.getShardDistribution().value;
  check(ordersDist.Totals.docs === 200 && ordersDist.Totals.chunks === 2, 'getShardDistribution of the ranged collection', ordersDist);

  // sh.moveChunk moves the ranged collection's upper chunk to the other shard: every order is
  // still there once, and sh.status() reports the migration (config.changelog).
  const ordersUUID = db.getSiblingDB('config').collections.findOne({ _id: dbName + '.orders' }).uuid;
  const upper = () => db.getSiblingDB('config').chunks.findOne({ uuid: ordersUUID, 'min.region': 'm' });
  const target = status.shards.map((s) => s._id).find((id) => id !== upper().shard);
  const moved = sh.moveChunk(dbName + '.orders', { region: 'north', _id: 2 }, target);
  check(moved.ok === 1, 'sh.moveChunk', moved);
  check(upper().shard === target, 'the chunk is on the other shard', upper());
  check(db.orders.countDocuments({}) === 200 && db.orders.countDocuments({ region: 'north' }) === 50,
    'every order once after the move', db.orders.countDocuments({}));
  const results = sh.status().value.balancer['Migration Results for the last 24 hours'];
  check(results !== undefined && Object.values(results).includes('Success'), 'sh.status: the migration results', results);

  check(db.dropDatabase().ok === 1, 'dropDatabase');
  check(!db.adminCommand({ listDatabases: 1 }).databases.some((d) => d.name === dbName), 'the database is gone');
  print('mongosh sharded: ok');
} catch (e) {
  print(e.stack || String(e));
  quit(1);
}
