package rollback

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/repl/oplog"
)

// DocumentReader reads the current version of a document (before recovery removes it).
type DocumentReader interface {
	// CurrentDocument returns the newest version of the document with _id id in the
	// collection with uuid; found is false when it or the collection does not exist.
	CurrentDocument(ctx context.Context, uuid catalog.UUID, id bsoncore.Value) (doc bsoncore.Document, found bool, err error)
}

// File is one rollback data file written.
type File struct {
	Path       string
	Collection catalog.UUID
	Docs       int
}

// fileTimeLayout is MongoDB's terse file-name time (terseCurrentTimeForFilename).
const fileTimeLayout = "2006-01-02T15-04-05"

// TouchedDocument is a document an insert, update or delete after the common point wrote.
type TouchedDocument struct {
	Collection catalog.UUID
	ID         bsoncore.Value
}

// internalNamespaces are server bookkeeping that MongoDB keeps out of the oplog's CRUD entries
// (a secondary derives them), so they never reach its rollback files; here they replicate as
// ordinary writes, and are kept out of the files for the same result.
var internalNamespaces = map[string]bool{"config.transactions": true, "config.image_collection": true}

// TouchedDocuments lists, oldest entry first and without repeats, the documents the CRUD
// entries of rolledBack (newest first, as FindCommonPoint returns them) touched. Commands and
// no-ops touch none, nor entries without a collection UUID or an _id, nor entries of
// internalNamespaces.
func TouchedDocuments(rolledBack []*oplog.Entry) []TouchedDocument {
	seen := map[string]bool{}
	var out []TouchedDocument
	for i := len(rolledBack) - 1; i >= 0; i-- {
		e := rolledBack[i]
		if internalNamespaces[e.NS] {
			continue
		}
		src := e.O
		switch e.Op {
		case "i", "d":
		case "u":
			src = e.O2
		default:
			continue
		}
		if !e.HasUI {
			continue
		}
		id, err := src.LookupErr("_id")
		if err != nil {
			continue
		}
		key := string(e.UI[:]) + string([]byte{byte(id.Type)}) + string(id.Data)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, TouchedDocument{Collection: e.UI, ID: id})
	}
	return out
}

// WriteFiles writes the current version of every touched document that still exists to
// dir/<collection UUID>/removed.<now>.<n>.bson, one file per collection, documents in the
// order of the entries that first touched them. Deleted documents have no current version:
// recovery brings back their old one. Each file and its directory are synced before
// WriteFiles returns, because recovery then deletes the only other copy.
func WriteFiles(ctx context.Context, dir string, now time.Time, docs DocumentReader, touched []TouchedDocument) ([]File, error) {
	byColl := map[catalog.UUID][]byte{}
	counts := map[catalog.UUID]int{}
	var order []catalog.UUID
	for _, td := range touched {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		doc, found, err := docs.CurrentDocument(ctx, td.Collection, td.ID)
		if err != nil {
			return nil, fmt.Errorf("reading document %s in collection %s: %w", td.ID, td.Collection, err)
		}
		if !found {
			continue
		}
		if _, ok := byColl[td.Collection]; !ok {
			order = append(order, td.Collection)
		}
		byColl[td.Collection] = append(byColl[td.Collection], doc...)
		counts[td.Collection]++
	}
	stamp := now.UTC().Format(fileTimeLayout)
	files := make([]File, 0, len(order))
	for _, u := range order {
		cdir := filepath.Join(dir, u.String())
		path, err := writeNewFile(cdir, "removed."+stamp, byColl[u])
		if err != nil {
			return files, err
		}
		files = append(files, File{Path: path, Collection: u, Docs: counts[u]})
	}
	return files, nil
}

// writeNewFile creates dir/<base>.<n>.bson with the first n from 0 that is not taken (two
// rollbacks in the same second keep both files), writes data and syncs file and directory.
func writeNewFile(dir, base string, data []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create rollback directory: %w", err)
	}
	var f *os.File
	var path string
	for n := 0; ; n++ {
		path = filepath.Join(dir, base+"."+strconv.Itoa(n)+".bson")
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create rollback file: %w", err)
		}
	}
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write rollback file %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	// The collection directory's own entry lives in its parent.
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return "", err
	}
	return path, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync rollback directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync rollback directory %s: %w", dir, err)
	}
	return nil
}

// ReadFile returns the documents of a rollback data file (concatenated BSON).
func ReadFile(path string) ([]bsoncore.Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []bsoncore.Document
	total := len(data)
	for len(data) > 0 {
		doc, rest, ok := bsoncore.ReadDocument(data)
		if !ok {
			return out, fmt.Errorf("rollback file %s: truncated document at byte %d", path, total-len(data))
		}
		if err := doc.Validate(); err != nil {
			return out, fmt.Errorf("rollback file %s: %w", path, err)
		}
		out = append(out, doc)
		data = rest
	}
	return out, nil
}
