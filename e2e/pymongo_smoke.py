"""pymongo smoke test against humongod (run by e2e/run.sh).

    python3 e2e/pymongo_smoke.py mongodb://127.0.0.1:PORT

Debian's python3-pymongo starts with the legacy OP_QUERY handshake, so this also covers it.
"""
import sys

import pymongo
from pymongo.errors import DuplicateKeyError


def main(uri):
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000, directConnection=True)
    try:
        db = client["e2e_pymongo"]
        client.drop_database("e2e_pymongo")
        c = db["items"]

        res = c.insert_many([
            {"_id": 1, "name": "apple", "qty": 5, "tags": ["fruit"]},
            {"_id": 2, "name": "banana", "qty": 12, "tags": ["fruit", "yellow"]},
            {"_id": 3, "name": "carrot", "qty": 7, "tags": ["vegetable"]},
            {"_id": 4, "name": "date", "qty": 20, "tags": ["fruit"]},
        ])
        assert res.inserted_ids == [1, 2, 3, 4], res.inserted_ids

        found = list(c.find({"tags": "fruit"}, {"_id": 1}).sort("qty", pymongo.DESCENDING).limit(2))
        assert found == [{"_id": 4}, {"_id": 2}], found

        r = c.update_one({"_id": 1}, {"$set": {"color": "red"}, "$inc": {"qty": 10}})
        assert (r.matched_count, r.modified_count) == (1, 1), r.raw_result
        doc = c.find_one({"_id": 1})
        assert doc["qty"] == 15 and doc["color"] == "red", doc

        r = c.update_one({"name": "eggplant"}, {"$set": {"qty": 1}}, upsert=True)
        assert r.upserted_id is not None, r.raw_result
        egg = c.find_one({"_id": r.upserted_id})
        assert egg["name"] == "eggplant" and egg["qty"] == 1, egg

        # The count command (count_documents would need the aggregate command).
        n = db.command("count", "items", query={"tags": "fruit"})["n"]
        assert n == 3, n
        assert c.estimated_document_count() == 5

        r = c.delete_many({"qty": {"$lt": 10}})
        assert r.deleted_count == 2, r.raw_result

        assert c.create_index([("name", pymongo.ASCENDING)], unique=True) == "name_1"
        info = c.index_information()
        assert info["name_1"].get("unique") is True, info
        try:
            c.insert_one({"name": "banana"})
        except DuplicateKeyError as e:
            assert e.code == 11000, e.details
        else:
            raise AssertionError("unique index violation not reported")

        assert db.list_collection_names() == ["items"], db.list_collection_names()
        c.drop()
        client.drop_database("e2e_pymongo")
        print("pymongo smoke: all checks passed (pymongo %s)" % pymongo.version)
    finally:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1])
