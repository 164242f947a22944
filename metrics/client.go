package metrics

// ClientHealth is what the client saw of itself while a level ran: whether
// tokbench, not the server, may have shaped the level's timings.
//
// TickLag is the lateness of a ticker goroutine that asks to wake every
// 5 ms (a precise sleep, so Go's millisecond timer granularity is not in
// it): it includes the kernel scheduling the process and Go scheduling the
// goroutine, the same delays a chunk's arrival stamp would suffer.
// CPUUtilization is the process's CPU time (user + system) over the level's
// wall time × GOMAXPROCS. GC pauses are stop-the-world pauses of the
// garbage collector during the level, from the runtime's histogram:
// GCPauseMaxMs is the upper bound of the bucket of the longest.
//
// KernelStamps is true when every stream's chunks were stamped with the
// kernel's receive instant: a client that runs late then still stamps each
// chunk it reads before the next one of its stream arrives exactly, and
// only chunks read late together share one stamp (the later one).
// FirstChunksSharingStamp is the share of requests whose first token chunk
// shares its stamp with the second, ChunksSharingStamp the share of all
// token chunks sharing their stamp with the next: chunks the server wrote
// together, or chunks the client read late together.
type ClientHealth struct {
	CPUUtilization float64 `json:"cpu_utilization"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
	GCPauses       int     `json:"gc_pauses"`
	GCPauseMaxMs   float64 `json:"gc_pause_max_ms"`
	GCPauseTotalMs float64 `json:"gc_pause_total_ms"`
	TickLagP50Ms   float64 `json:"tick_lag_p50_ms"`
	TickLagP99Ms   float64 `json:"tick_lag_p99_ms"`
	TickLagMaxMs   float64 `json:"tick_lag_max_ms"`

	KernelStamps            bool    `json:"kernel_receive_stamps"`
	FirstChunksSharingStamp float64 `json:"first_chunks_sharing_stamp"`
	ChunksSharingStamp      float64 `json:"chunks_sharing_stamp"`

	// KeptAwake is what --keep-awake cost the level: the processors it
	// kept from idling and the CPU time of their idle-priority loops
	// (time nothing else wanted).
	KeptAwake *KeptAwake `json:"kept_awake,omitempty"`

	// GCRoomBytes is how far the heap could grow between garbage
	// collection cycles while the level ran, above what the last cycle
	// left live; 0 when it had none: GOGC set in the environment, the
	// collector turned off, or too little memory to spare.
	GCRoomBytes int64 `json:"gc_room_bytes,omitempty"`
}

// KeptAwake is the cost of keeping the processors from idling.
type KeptAwake struct {
	CPUs       int     `json:"cpus"`
	CPUSeconds float64 `json:"cpu_seconds"`
}
