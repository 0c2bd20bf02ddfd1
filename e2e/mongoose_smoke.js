// Mongoose smoke test against humongod (run by e2e/run.sh):
//   node e2e/mongoose_smoke.js mongodb://127.0.0.1:PORT/?directConnection=true
//
// Exercises what an ODM leans on (issue 6 acceptance): schemas with validation (required, min/max,
// enum, custom validators; client-side ValidationError), a unique index created by init() and
// reconciled by syncIndexes() (createIndexes/listIndexes/dropIndexes; E11000 on a duplicate),
// queries with filter/sort/limit/select/lean, updates with runValidators, findOneAndUpdate with
// new: true, populate (find with _id: {$in: [...]}) including virtual and nested populate,
// aggregate ($match/$group/$sort/$lookup/$unwind/$project), countDocuments (an aggregate with
// $group), distinct and deleteMany; plus a server-side $jsonSchema validator (error 121) and a
// query cursor across getMore batches. Every result is asserted; any failure exits non-zero and
// names the step that failed.
'use strict';
const assert = require('node:assert/strict');
const mongoose = require('mongoose');

const { Schema } = mongoose;

// step labels the current check so that a failure names it (the server error alone often does
// not say which Mongoose call sent the command).
let current = 'connect';
async function step(name, fn) {
  current = name;
  await fn();
}

const authorSchema = new Schema(
  {
    name: { type: String, required: true, trim: true, index: { unique: true } },
    email: {
      type: String,
      required: [true, 'email is required'],
      validate: {
        validator: (v) => /^[^@\s]+@[^@\s]+\.[a-z]{2,}$/.test(v),
        message: (props) => `${props.value} is not a valid email`,
      },
    },
    country: { type: String, enum: ['UK', 'US', 'FR'], default: 'UK' },
    born: { type: Number, min: 1500, max: 2025 },
  },
  { timestamps: true, toJSON: { virtuals: true }, toObject: { virtuals: true } },
);
// Virtual populate: Author.books is filled by find({author: {$in: [author ids]}}).
authorSchema.virtual('books', { ref: 'Book', localField: '_id', foreignField: 'author' });
authorSchema.virtual('bookCount', { ref: 'Book', localField: '_id', foreignField: 'author', count: true });

const bookSchema = new Schema({
  title: { type: String, required: true },
  author: { type: Schema.Types.ObjectId, ref: 'Author', required: true, index: true },
  pages: { type: Number, required: true, min: [1, 'a book has at least one page'], max: 5000 },
  genre: { type: String, required: true, enum: { values: ['fiction', 'history', 'science'], message: '{VALUE} is not a genre' } },
  isbn: {
    type: String,
    validate: { validator: (v) => /^\d{13}$/.test(v), message: 'isbn must be 13 digits' },
  },
  tags: [String],
  price: { type: Number, min: 0 },
});

const reviewSchema = new Schema({
  book: { type: Schema.Types.ObjectId, ref: 'Book', required: true },
  stars: { type: Number, required: true, min: 1, max: 5, validate: Number.isInteger },
  text: String,
});

// No Mongoose validators here: the server's $jsonSchema validator is what rejects bad documents.
// autoCreate is off so that the collection is created by the createCollection call that carries
// the validator (an auto-created collection would already exist without one).
const entrySchema = new Schema({ account: String, amount: Number, seq: Number }, { autoCreate: false });

const Author = mongoose.model('Author', authorSchema);
const Book = mongoose.model('Book', bookSchema);
const Review = mongoose.model('Review', reviewSchema);
const Entry = mongoose.model('Entry', entrySchema);

// Commands the driver sent, recorded through command monitoring so that the checks below can
// assert what Mongoose put on the wire (populate's $in, countDocuments' aggregate).
let sent = [];
async function commandsOf(fn) {
  sent = [];
  const result = await fn();
  return { result, cmds: sent.splice(0) };
}

function titles(docs) {
  return docs.map((d) => d.title);
}

async function main() {
  const uri = process.argv[2];
  assert.ok(uri, 'usage: node mongoose_smoke.js <uri>');
  mongoose.set('strictQuery', true);
  await mongoose.connect(uri, { dbName: 'e2e_mongoose', serverSelectionTimeoutMS: 10000, monitorCommands: true });
  mongoose.connection.getClient().on('commandStarted', (ev) => sent.push({ name: ev.commandName, command: ev.command }));
  try {
    await run();
  } finally {
    await mongoose.disconnect();
  }
  console.log('mongoose smoke: all checks passed');
}

async function run() {
  await step('dropDatabase', async () => {
    await mongoose.connection.dropDatabase();
  });

  // --- collections and indexes ------------------------------------------------------------------
  await step('Model.init (createCollection + createIndexes)', async () => {
    await Promise.all([Author.init(), Book.init(), Review.init()]);
    const names = (await mongoose.connection.db.listCollections().toArray()).map((c) => c.name).sort();
    assert.deepEqual(names, ['authors', 'books', 'reviews']);
    const idx = await Author.listIndexes();
    const byName = Object.fromEntries(idx.map((i) => [i.name, i]));
    assert.deepEqual(Object.keys(byName).sort(), ['_id_', 'name_1']);
    assert.deepEqual(byName.name_1.key, { name: 1 });
    assert.equal(byName.name_1.unique, true);
  });

  await step('syncIndexes drops an index the schema does not declare', async () => {
    assert.equal(await Author.collection.createIndex({ country: 1 }), 'country_1');
    const dropped = await Author.syncIndexes();
    assert.deepEqual(dropped, ['country_1']);
    const names = (await Author.listIndexes()).map((i) => i.name).sort();
    assert.deepEqual(names, ['_id_', 'name_1']);
    // Idempotent: a second sync has nothing to drop or build.
    assert.deepEqual(await Author.syncIndexes(), []);
    assert.deepEqual((await Book.listIndexes()).map((i) => i.name).sort(), ['_id_', 'author_1']);
  });

  // --- inserts --------------------------------------------------------------------------------
  let austen, gibbon, sagan, curie;
  await step('create / insertMany', async () => {
    austen = await Author.create({ name: '  Jane Austen ', email: 'jane@example.org', born: 1775 });
    assert.equal(austen.name, 'Jane Austen'); // trim setter
    assert.equal(austen.country, 'UK'); // default
    assert.ok(austen.createdAt instanceof Date);
    assert.ok(austen._id instanceof mongoose.Types.ObjectId);
    [gibbon, sagan, curie] = await Author.insertMany([
      { name: 'Edward Gibbon', email: 'gibbon@example.org', born: 1737 },
      { name: 'Carl Sagan', email: 'carl@example.com', country: 'US', born: 1934 },
      { name: 'Marie Curie', email: 'marie@example.fr', country: 'FR', born: 1867 },
    ]);
    assert.equal(curie.country, 'FR');
    const books = await Book.insertMany([
      { title: 'Pride and Prejudice', author: austen._id, pages: 432, genre: 'fiction', isbn: '9780141439518', tags: ['classic', 'romance'], price: 8 },
      { title: 'Emma', author: austen._id, pages: 474, genre: 'fiction', tags: ['classic'], price: 9 },
      { title: 'Persuasion', author: austen._id, pages: 249, genre: 'fiction', tags: ['classic', 'romance'], price: 7 },
      { title: 'Decline and Fall, vol. 1', author: gibbon._id, pages: 1200, genre: 'history', tags: ['rome'], price: 30 },
      { title: 'Cosmos', author: sagan._id, pages: 396, genre: 'science', isbn: '9780345539434', tags: ['space'], price: 15 },
      { title: 'Pale Blue Dot', author: sagan._id, pages: 429, genre: 'science', tags: ['space'], price: 14 },
    ]);
    assert.equal(books.length, 6);
    assert.equal(await Book.countDocuments(), 6);
    assert.equal(await Author.estimatedDocumentCount(), 4);
    const cosmos = books.find((b) => b.title === 'Cosmos');
    const reviews = await Review.create([
      { book: cosmos._id, stars: 5, text: 'billions' },
      { book: cosmos._id, stars: 4 },
      { book: books[0]._id, stars: 5 },
    ]);
    assert.equal(reviews.length, 3);
  });

  // --- validation (client side, nothing reaches the server) ---------------------------------------
  await step('ValidationError on create', async () => {
    await assert.rejects(
      Book.create({ author: austen._id, pages: 9000, genre: 'poetry', isbn: '12' }),
      (err) => {
        assert.ok(err instanceof mongoose.Error.ValidationError, String(err));
        assert.deepEqual(Object.keys(err.errors).sort(), ['genre', 'isbn', 'pages', 'title']);
        assert.equal(err.errors.title.kind, 'required');
        assert.equal(err.errors.pages.kind, 'max');
        assert.equal(err.errors.genre.kind, 'enum');
        assert.equal(err.errors.genre.message, 'poetry is not a genre');
        assert.equal(err.errors.isbn.kind, 'user defined');
        assert.equal(err.errors.isbn.message, 'isbn must be 13 digits');
        return true;
      },
    );
    await assert.rejects(Author.create({ name: 'Nobody', email: 'not-an-email', born: 1400, country: 'DE' }), (err) => {
      assert.ok(err instanceof mongoose.Error.ValidationError, String(err));
      assert.equal(err.errors.email.message, 'not-an-email is not a valid email');
      assert.equal(err.errors.born.kind, 'min');
      assert.equal(err.errors.country.kind, 'enum');
      return true;
    });
    await assert.rejects(Review.create({ book: austen._id, stars: 2.5 }), mongoose.Error.ValidationError);
    // A validateSync on an unsaved document and on a cast failure.
    const bad = new Book({ title: 'x', author: 'not-an-id', pages: 'many', genre: 'fiction' });
    const verr = bad.validateSync();
    assert.equal(verr.errors.author.name, 'CastError');
    assert.equal(verr.errors.pages.name, 'CastError');
    assert.equal(await Book.countDocuments(), 6);
    assert.equal(await Author.countDocuments(), 4);
  });

  // --- duplicate key (server side) --------------------------------------------------------------
  await step('E11000 on the unique index', async () => {
    await assert.rejects(Author.create({ name: 'Carl Sagan', email: 'other@example.com' }), (err) => {
      assert.equal(err.name, 'MongoServerError', String(err));
      assert.equal(err.code, 11000);
      assert.match(err.message, /E11000 duplicate key error collection: e2e_mongoose\.authors index: name_1 dup key/);
      assert.deepEqual(err.keyPattern, { name: 1 });
      assert.deepEqual(err.keyValue, { name: 'Carl Sagan' });
      return true;
    });
    // An unordered insertMany inserts what it can and reports the duplicate.
    await assert.rejects(
      Author.insertMany(
        [
          { name: 'Ada Lovelace', email: 'ada@example.org', born: 1815 },
          { name: 'Jane Austen', email: 'dup@example.org' },
          { name: 'Mary Shelley', email: 'mary@example.org', born: 1797 },
        ],
        { ordered: false },
      ),
      (err) => {
        assert.equal(err.code, 11000, String(err));
        assert.equal(err.insertedDocs.length, 2);
        assert.equal(err.writeErrors.length, 1);
        assert.equal(err.writeErrors[0].index, 1);
        return true;
      },
    );
    assert.equal(await Author.countDocuments(), 6);
    assert.equal((await Author.deleteMany({ name: { $in: ['Ada Lovelace', 'Mary Shelley'] } })).deletedCount, 2);
  });

  await step('server-side $jsonSchema validation (121)', async () => {
    await Entry.createCollection({
      validator: {
        $jsonSchema: {
          bsonType: 'object',
          required: ['account', 'amount'],
          properties: { account: { bsonType: 'string', minLength: 3 }, amount: { bsonType: 'number', minimum: 0 } },
        },
      },
    });
    const info = (await mongoose.connection.db.listCollections({ name: 'entries' }).toArray())[0];
    assert.deepEqual(info.options.validator.$jsonSchema.required, ['account', 'amount']);
    await assert.rejects(Entry.create({ account: 'cash', amount: -1 }), (err) => {
      assert.equal(err.name, 'MongoServerError', String(err));
      assert.equal(err.code, 121);
      assert.match(err.message, /Document failed validation/);
      assert.equal(err.errInfo.details.operatorName, '$jsonSchema');
      assert.ok(err.errInfo.failingDocumentId instanceof mongoose.Types.ObjectId);
      return true;
    });
    await assert.rejects(
      Entry.updateOne({ account: 'cash' }, { $unset: { amount: 1 } }, { upsert: true }),
      (err) => err.code === 121,
    );
    assert.equal(await Entry.countDocuments(), 0);
    // Valid documents, then a Mongoose query cursor across several getMore batches.
    await Entry.insertMany(Array.from({ length: 250 }, (_, i) => ({ account: 'acct' + (i % 5), amount: i, seq: i })));
    let seen = 0;
    let total = 0;
    await Entry.find({ amount: { $gte: 0 } }).sort({ seq: 1 }).batchSize(40).cursor().eachAsync((e) => {
      assert.equal(e.seq, seen);
      seen++;
      total += e.amount;
    });
    assert.equal(seen, 250);
    assert.equal(total, (249 * 250) / 2);
    assert.equal((await Entry.deleteMany({ account: 'acct0' })).deletedCount, 50);
    assert.equal(await Entry.countDocuments(), 200);
  });

  // --- queries ----------------------------------------------------------------------------------
  await step('find with filter/sort/limit/select/lean', async () => {
    const long = await Book.find({ pages: { $gte: 400 } }).sort({ pages: -1 }).limit(3).select('title pages -_id').lean();
    assert.deepEqual(long, [
      { title: 'Decline and Fall, vol. 1', pages: 1200 },
      { title: 'Emma', pages: 474 },
      { title: 'Pride and Prejudice', pages: 432 },
    ]);
    assert.ok(!(long[0] instanceof mongoose.Document));
    const fiction = await Book.find({ genre: 'fiction', tags: 'romance' }).sort('title');
    assert.deepEqual(titles(fiction), ['Persuasion', 'Pride and Prejudice']);
    assert.ok(fiction[0] instanceof mongoose.Document);
    // Query casting: the string id and the string number are cast by the schema.
    const byId = await Book.findById(String(fiction[0]._id)).lean();
    assert.equal(byId.title, 'Persuasion');
    const cheap = await Book.find({ price: { $lt: '9' } }).sort({ price: 1 }).skip(1).lean();
    assert.deepEqual(titles(cheap), ['Pride and Prejudice']);
    const sci = await Book.findOne({ genre: 'science' }).sort({ pages: 1 }).lean();
    assert.equal(sci.title, 'Cosmos');
    assert.deepEqual(sci.tags, ['space']);
    const orq = await Book.find({ $or: [{ isbn: { $exists: true } }, { pages: { $lt: 300 } }] }).sort({ title: 1 }).lean();
    assert.deepEqual(titles(orq), ['Cosmos', 'Persuasion', 'Pride and Prejudice']);
    const regex = await Author.find({ name: /^(carl|marie)/i }).sort({ born: 1 }).lean();
    assert.deepEqual(regex.map((a) => a.name), ['Marie Curie', 'Carl Sagan']);
    assert.deepEqual((await Book.distinct('genre')).sort(), ['fiction', 'history', 'science']);
    assert.equal(await Book.exists({ title: 'Emma' }).then((r) => String(r._id)), String((await Book.findOne({ title: 'Emma' }))._id));
    assert.equal(await Book.exists({ title: 'Ulysses' }), null);
  });

  // --- updates ----------------------------------------------------------------------------------
  await step('updateOne with runValidators', async () => {
    const ok = await Book.updateOne({ title: 'Emma' }, { $set: { price: 10 }, $addToSet: { tags: 'comedy' } }, { runValidators: true });
    assert.equal(ok.acknowledged, true);
    assert.equal(ok.matchedCount, 1);
    assert.equal(ok.modifiedCount, 1);
    const emma = await Book.findOne({ title: 'Emma' }).lean();
    assert.equal(emma.price, 10);
    assert.deepEqual(emma.tags, ['classic', 'comedy']);
    await assert.rejects(
      Book.updateOne({ title: 'Emma' }, { $set: { pages: 0, genre: 'cookery' } }, { runValidators: true }),
      (err) => {
        assert.ok(err instanceof mongoose.Error.ValidationError, String(err));
        assert.equal(err.errors.pages.message, 'a book has at least one page');
        assert.equal(err.errors.genre.kind, 'enum');
        return true;
      },
    );
    assert.equal((await Book.findOne({ title: 'Emma' }).lean()).pages, 474);
    const many = await Book.updateMany({ genre: 'science' }, { $inc: { price: 1 } });
    assert.equal(many.matchedCount, 2);
    assert.equal(many.modifiedCount, 2);
    const none = await Book.updateOne({ title: 'Ulysses' }, { $set: { price: 1 } });
    assert.equal(none.matchedCount, 0);
    assert.equal(none.modifiedCount, 0);
  });

  await step('findOneAndUpdate new/runValidators/upsert', async () => {
    const after = await Book.findOneAndUpdate({ title: 'Cosmos' }, { $inc: { pages: 4 }, $push: { tags: 'tv' } }, { new: true, runValidators: true });
    assert.ok(after instanceof mongoose.Document);
    assert.equal(after.pages, 400);
    assert.equal(after.price, 16);
    assert.deepEqual([...after.tags], ['space', 'tv']);
    const before = await Book.findOneAndUpdate({ title: 'Cosmos' }, { $set: { price: 20 } }).lean();
    assert.equal(before.price, 16);
    await assert.rejects(
      Book.findOneAndUpdate({ title: 'Cosmos' }, { $set: { price: -5 } }, { new: true, runValidators: true }),
      (err) => err instanceof mongoose.Error.ValidationError && err.errors.price.kind === 'min',
    );
    const up = await Author.findOneAndUpdate(
      { name: 'Ursula K. Le Guin' },
      { $set: { email: 'ursula@example.com', country: 'US', born: 1929 } },
      { new: true, upsert: true, runValidators: true, setDefaultsOnInsert: true },
    );
    assert.equal(up.name, 'Ursula K. Le Guin');
    assert.equal(up.born, 1929);
    assert.ok(up.createdAt instanceof Date); // timestamps on upsert
    const gone = await Author.findOneAndDelete({ name: 'Ursula K. Le Guin' });
    assert.equal(gone.email, 'ursula@example.com');
    assert.equal(await Author.countDocuments(), 4);
  });

  await step('document save()', async () => {
    const p = await Book.findOne({ title: 'Persuasion' });
    p.price = 6;
    p.tags.push('navy');
    await p.save();
    const reread = await Book.findById(p._id).lean();
    assert.equal(reread.price, 6);
    assert.deepEqual(reread.tags, ['classic', 'romance', 'navy']);
    p.pages = 99999;
    await assert.rejects(p.save(), mongoose.Error.ValidationError);
    assert.equal((await Book.findById(p._id).lean()).pages, 249);
  });

  // --- populate (find with {_id: {$in: [...]}}) -------------------------------------------------
  await step('populate ref field', async () => {
    const { result: books, cmds } = await commandsOf(() =>
      Book.find({ genre: { $in: ['fiction', 'science'] } }).sort({ title: 1 }).populate('author', 'name country'));
    // One find on books, then one find on authors by _id: {$in: [the distinct referenced ids]}.
    assert.deepEqual(cmds.map((c) => [c.name, c.command.find]), [['find', 'books'], ['find', 'authors']]);
    const inIds = cmds[1].command.filter._id.$in.map(String).sort();
    assert.deepEqual(inIds, [String(austen._id), String(sagan._id)].sort());
    assert.deepEqual(
      books.map((b) => [b.title, b.author.name, b.author.country]),
      [
        ['Cosmos', 'Carl Sagan', 'US'],
        ['Emma', 'Jane Austen', 'UK'],
        ['Pale Blue Dot', 'Carl Sagan', 'US'],
        ['Persuasion', 'Jane Austen', 'UK'],
        ['Pride and Prejudice', 'Jane Austen', 'UK'],
      ],
    );
    assert.equal(String(books[0].populated('author')), String(sagan._id));
    // populate with match: authors not matching are null.
    const matched = await Book.find().sort({ title: 1 }).populate({ path: 'author', match: { country: 'US' }, select: 'name' }).lean();
    assert.deepEqual(
      matched.map((b) => [b.title, b.author && b.author.name]),
      [
        ['Cosmos', 'Carl Sagan'],
        ['Decline and Fall, vol. 1', null],
        ['Emma', null],
        ['Pale Blue Dot', 'Carl Sagan'],
        ['Persuasion', null],
        ['Pride and Prejudice', null],
      ],
    );
  });

  await step('virtual and nested populate', async () => {
    const authors = await Author.find({ name: { $ne: 'Marie Curie' } })
      .sort({ name: 1 })
      .populate({ path: 'books', select: 'title author -_id', options: { sort: { pages: 1 } } })
      .populate('bookCount');
    assert.deepEqual(
      authors.map((a) => [a.name, a.books.map((b) => b.title), a.bookCount]),
      [
        ['Carl Sagan', ['Cosmos', 'Pale Blue Dot'], 2],
        ['Edward Gibbon', ['Decline and Fall, vol. 1'], 1],
        ['Jane Austen', ['Persuasion', 'Pride and Prejudice', 'Emma'], 3],
      ],
    );
    const curieAuthor = await Author.findOne({ name: 'Marie Curie' }).populate('books bookCount');
    assert.deepEqual(curieAuthor.books, []);
    assert.equal(curieAuthor.bookCount, 0);
    const reviews = await Review.find().sort({ stars: -1, _id: 1 }).populate({ path: 'book', select: 'title author', populate: { path: 'author', select: 'name' } }).lean();
    assert.deepEqual(
      reviews.map((r) => [r.stars, r.book.title, r.book.author.name]),
      [
        [5, 'Cosmos', 'Carl Sagan'],
        [5, 'Pride and Prejudice', 'Jane Austen'],
        [4, 'Cosmos', 'Carl Sagan'],
      ],
    );
  });

  // --- aggregation ------------------------------------------------------------------------------
  await step('countDocuments (aggregate)', async () => {
    const { result: n, cmds } = await commandsOf(() => Book.countDocuments({ genre: 'fiction' }));
    assert.equal(n, 3);
    assert.deepEqual(cmds.map((c) => [c.name, c.command.aggregate]), [['aggregate', 'books']]);
    assert.equal(await Book.countDocuments({ pages: { $gt: 10000 } }), 0);
    assert.equal(await Book.countDocuments({}).skip(2).limit(3), 3);
  });

  await step('aggregate $match/$group/$sort/$lookup', async () => {
    const rows = await Book.aggregate([
      { $match: { pages: { $gte: 300 } } },
      { $group: { _id: '$author', books: { $sum: 1 }, pages: { $sum: '$pages' }, avgPrice: { $avg: '$price' }, titles: { $push: '$title' } } },
      { $sort: { pages: -1 } },
      { $lookup: { from: 'authors', localField: '_id', foreignField: '_id', as: 'who' } },
      { $unwind: '$who' },
      { $project: { _id: 0, name: '$who.name', country: '$who.country', books: 1, pages: 1, avgPrice: 1, titles: 1 } },
    ]);
    for (const r of rows) r.titles.sort();
    // Prices and pages as left by the update steps: Emma 10 and P&P 8; Cosmos 400 pages at 20,
    // Pale Blue Dot 15.
    assert.deepEqual(rows, [
      { books: 1, pages: 1200, avgPrice: 30, titles: ['Decline and Fall, vol. 1'], name: 'Edward Gibbon', country: 'UK' },
      { books: 2, pages: 906, avgPrice: 9, titles: ['Emma', 'Pride and Prejudice'], name: 'Jane Austen', country: 'UK' },
      { books: 2, pages: 829, avgPrice: 17.5, titles: ['Cosmos', 'Pale Blue Dot'], name: 'Carl Sagan', country: 'US' },
    ]);
    // Mongoose's Aggregate builder and a $lookup from the "one" side with an ObjectId $match.
    const perAuthor = await Author.aggregate()
      .match({ _id: { $in: [austen._id, sagan._id, curie._id] } })
      .lookup({ from: 'books', localField: '_id', foreignField: 'author', as: 'books' })
      .project({ _id: 0, name: 1, n: { $size: '$books' } })
      .sort({ n: -1, name: 1 });
    assert.deepEqual(perAuthor, [
      { name: 'Jane Austen', n: 3 },
      { name: 'Carl Sagan', n: 2 },
      { name: 'Marie Curie', n: 0 },
    ]);
    const byTag = await Book.aggregate([
      { $unwind: '$tags' },
      { $group: { _id: '$tags', count: { $sum: 1 } } },
      { $sort: { count: -1, _id: 1 } },
      { $limit: 3 },
    ]);
    assert.deepEqual(byTag, [
      { _id: 'classic', count: 3 },
      { _id: 'romance', count: 2 },
      { _id: 'space', count: 2 },
    ]);
  });

  // --- deletes ----------------------------------------------------------------------------------
  await step('deleteOne / deleteMany', async () => {
    const one = await Review.deleteOne({ stars: 4 });
    assert.equal(one.deletedCount, 1);
    const del = await Book.deleteMany({ author: austen._id });
    assert.equal(del.acknowledged, true);
    assert.equal(del.deletedCount, 3);
    assert.equal(await Book.countDocuments(), 3);
    assert.equal((await Book.deleteMany({ genre: 'fiction' })).deletedCount, 0);
    // The populated ref now dangles: populate yields null, not an error.
    const r = await Review.findOne({ stars: 5, text: { $exists: false } }).populate('book').lean();
    assert.equal(r.book, null);
  });

  await step('dropDatabase at the end', async () => {
    await mongoose.connection.dropDatabase();
    const dbs = await mongoose.connection.db.admin().listDatabases();
    assert.ok(!dbs.databases.some((d) => d.name === 'e2e_mongoose'), JSON.stringify(dbs.databases));
  });
}

main().catch((err) => {
  console.error(`mongoose smoke: FAILED at step "${current}"`);
  console.error(err);
  process.exitCode = 1;
  return mongoose.disconnect().catch(() => {});
});
