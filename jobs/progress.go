package jobs

// Progress of a running stage, for the run page, the API, `runs show` and the stage log
// (the scheduler keeps it in the run's record): each report carries the fields it
// knows, and the receiver keeps the others from earlier reports.

// reportFiles says how many source files a run of an ingest reads, and their bytes.
func reportFiles(env *Env, files []*sourceFile) {
	if env.Progress == nil {
		return
	}
	var n int64
	for _, f := range files {
		n += f.Size
	}
	env.Progress(Progress{FilesTotal: len(files), BytesTotal: n, Phase: "reading the source files"})
}

// reportRead says what a stage has read so far: rows (and for an ingest, source
// files and their bytes).
func reportRead(env *Env, res *Result) {
	if env.Progress != nil {
		env.Progress(Progress{RowsRead: res.RowsRead, RowsWritten: res.RowsWritten, FilesDone: int(res.FilesRead), BytesRead: res.BytesRead})
	}
}

// reportPass says which pass over spill files a stage over its memory budget works on.
func reportPass(env *Env, pass, passes int) {
	if env.Progress != nil {
		env.Progress(Progress{Pass: pass, Passes: passes, Phase: "working over the memory budget in passes"})
	}
}

// reportPart says how many parts of a MERGE done in parts are merged.
func reportPart(env *Env, parts int) {
	if env != nil && env.Progress != nil {
		env.Progress(Progress{Parts: parts, Phase: "merging in parts"})
	}
}
