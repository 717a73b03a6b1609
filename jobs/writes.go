package jobs

// Writes returns the declared tables a stage commits to (its config's writes; a Stage
// of another package says with a Writes method).
func Writes(s Stage) []string {
	if w, ok := s.(interface{ Writes() []string }); ok {
		return w.Writes()
	}
	var cfg Config
	switch st := s.(type) {
	case *Ingest:
		cfg = st.cfg
	case *CaptureHistory:
		cfg = st.cfg
	case *SCD2Merge:
		cfg = st.cfg
	case *SCD1Merge:
		cfg = st.cfg
	case *Vacuum:
		cfg = st.cfg
	case *FactLoad:
		cfg = st.cfg
	default:
		return nil
	}
	_, writes := cfg.Tables()
	return writes
}
