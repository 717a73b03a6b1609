package delta

import (
	"errors"
	"fmt"
)

// ConflictKind names the rule a concurrent commit broke (DELTA.md §9, Delta-Spark's
// exception names).
type ConflictKind string

// The conflict kinds.
const (
	// ConflictConcurrentAppend: the winner added files in what this transaction read.
	ConflictConcurrentAppend ConflictKind = "ConcurrentAppend"
	// ConflictConcurrentDeleteRead: the winner removed a file this transaction read.
	ConflictConcurrentDeleteRead ConflictKind = "ConcurrentDeleteRead"
	// ConflictConcurrentDeleteDelete: both removed the same file.
	ConflictConcurrentDeleteDelete ConflictKind = "ConcurrentDeleteDelete"
	// ConflictMetadataChanged: the winner changed the table metadata (schema, properties).
	ConflictMetadataChanged ConflictKind = "MetadataChanged"
	// ConflictProtocolChanged: the winner changed the protocol.
	ConflictProtocolChanged ConflictKind = "ProtocolChanged"
	// ConflictConcurrentTransaction: the winner wrote a txn action for the same appId.
	ConflictConcurrentTransaction ConflictKind = "ConcurrentTransaction"
	// ConflictDomainMetadata: both wrote the same metadata domain.
	ConflictDomainMetadata ConflictKind = "ConcurrentDomainMetadata"
	// ConflictTooManyAttempts: the commit lost the race more often than allowed; the
	// winners did not conflict logically, so re-running the transaction is safe.
	ConflictTooManyAttempts ConflictKind = "TooManyAttempts"
)

// ConflictError reports a commit that could not be made because a concurrent commit
// (WinningVersion) changed what this transaction depended on. Nothing of the transaction
// was committed; its data files are orphans. Callers test for it with errors.As.
type ConflictError struct {
	Kind           ConflictKind
	ReadVersion    int64  // the version the transaction read
	WinningVersion int64  // the concurrent commit that conflicted
	Path           string // the file involved, when there is one
	Detail         string
	// AppID and TxnVersion are, for ConflictConcurrentTransaction, the txn the winner
	// committed: when it is at or past the transaction's own, its work is done.
	AppID      string
	TxnVersion int64
}

// CommittedBy reports whether err is a conflict with a concurrent commit of the same
// work: a txn of appID at or past version. The caller's work is then done.
func CommittedBy(err error, appID string, version int64) bool {
	var ce *ConflictError
	return errors.As(err, &ce) && ce.Kind == ConflictConcurrentTransaction && ce.AppID == appID && ce.TxnVersion >= version
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("commit conflict (%s) with version %d (read version %d)", e.Kind, e.WinningVersion, e.ReadVersion)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// checkWinner applies the conflict rules to one winning commit.
func (tx *Transaction) checkWinner(v int64, acts []Action) *ConflictError {
	conflict := func(kind ConflictKind, path, detail string) *ConflictError {
		return &ConflictError{Kind: kind, ReadVersion: tx.readVersion, WinningVersion: v, Path: path, Detail: detail}
	}
	// A winner that committed one of this transaction's txns did its work (or part of
	// it): that is the conflict to report, whatever else the winner changed.
	for i := range acts {
		if t := acts[i].Txn; t != nil {
			if _, ours := tx.txns[t.AppID]; ours {
				ce := conflict(ConflictConcurrentTransaction, "", fmt.Sprintf("application %q committed version %d concurrently", t.AppID, t.Version))
				ce.AppID, ce.TxnVersion = t.AppID, t.Version
				return ce
			}
		}
	}
	var info *CommitInfo
	for i := range acts {
		a := &acts[i]
		switch {
		case a.CommitInfo != nil:
			info = a.CommitInfo
		case a.Protocol != nil:
			return conflict(ConflictProtocolChanged, "", "the protocol changed")
		case a.MetaData != nil:
			if tx.md == nil && identityOnlyChange(tx.snap, a.MetaData) {
				continue // a concurrent identity insert (identity.go)
			}
			return conflict(ConflictMetadataChanged, "", "the table metadata changed")
		case a.DomainMetadata != nil:
			if tx.domains[a.DomainMetadata.Domain] {
				return conflict(ConflictDomainMetadata, "", fmt.Sprintf("domain %q changed", a.DomainMetadata.Domain))
			}
		}
	}
	winnerBlind := info != nil && info.IsBlindAppend != nil && *info.IsBlindAppend
	// Transactions that change no data are checked with snapshot isolation: concurrent
	// appends cannot invalidate them.
	checkAdds := tx.changesData() && !(tx.isolation == WriteSerializable && winnerBlind && tx.md == nil)
	for i := range acts {
		a := &acts[i]
		switch {
		case a.Add != nil && checkAdds:
			if tx.readWhole {
				return conflict(ConflictConcurrentAppend, a.Add.Path, "files were added to the table this transaction read")
			}
			for _, p := range tx.readPredicates {
				if p(a.Add.PartitionValues) {
					return conflict(ConflictConcurrentAppend, a.Add.Path, "files were added to partitions this transaction read")
				}
			}
		case a.Remove != nil:
			path := a.Remove.Path
			if tx.removed[path] {
				return conflict(ConflictConcurrentDeleteDelete, path, "a file this transaction removes was removed concurrently")
			}
			if tx.readFiles[path] || tx.readWhole {
				return conflict(ConflictConcurrentDeleteRead, path, "a file this transaction read was removed concurrently")
			}
			for _, p := range tx.readPredicates {
				if p(a.Remove.PartitionValues) {
					return conflict(ConflictConcurrentDeleteRead, path, "a file in partitions this transaction read was removed concurrently")
				}
			}
		}
	}
	return nil
}
