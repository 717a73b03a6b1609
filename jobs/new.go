package jobs

import "fmt"

// New returns the stage for a validated config. consumers are the capture_history stages
// of every loaded pipeline (vacuum stages protect what they still need).
func New(name string, cfg Config, consumers []Consumer) (Stage, error) {
	switch c := cfg.(type) {
	case *IngestConfig:
		return NewIngest(name, c), nil
	case *CaptureHistoryConfig:
		return NewCaptureHistory(name, c), nil
	case *SCD2Config:
		return NewSCD2Merge(name, c), nil
	case *SCD1Config:
		return NewSCD1Merge(name, c), nil
	case *VacuumConfig:
		return NewVacuum(name, c, consumers), nil
	case *FactLoadConfig:
		return NewFactLoad(name, c), nil
	}
	return nil, fmt.Errorf("stage %s: unknown stage config %T", name, cfg)
}
