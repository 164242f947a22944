package cli

import (
	"strings"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/media"
	"github.com/tokbench/tokbench/sim"
	"github.com/tokbench/tokbench/workload"
)

// parseMedia reads the media flags (--images, --image-size,
// --image-format, --audio-seconds) of bench, simulate and ceiling.
func parseMedia(images int, size, format string, audioSeconds float64) (workload.MediaSpec, error) {
	spec := workload.MediaSpec{Images: images, Format: strings.ToLower(strings.TrimSpace(format)), AudioSeconds: audioSeconds}
	switch {
	case images < 0 || images > benchmark.MaxImagesPerRequest:
		return spec, usagef("--images: want 0 to %d images a request, got %d", benchmark.MaxImagesPerRequest, images)
	case !(audioSeconds >= 0) || audioSeconds > media.MaxAudioSeconds:
		return spec, usagef("--audio-seconds: want 0 to %d seconds, got %g", media.MaxAudioSeconds, audioSeconds)
	}
	switch spec.Format {
	case "png":
	case "", "jpeg", "jpg":
		spec.Format = "jpeg"
	default:
		return spec, usagef("--image-format: want png or jpeg, got %q", format)
	}
	var err error
	if spec.Width, spec.Height, err = workload.ParseImageSize(size); err != nil {
		return spec, usagef("--image-size: %v", err)
	}
	return spec, nil
}

// simMedia reads simulate's and ceiling's media flags.
func simMedia(images int, size string, audioSeconds float64) (sim.MediaLoad, error) {
	spec, err := parseMedia(images, size, "jpeg", audioSeconds)
	if err != nil {
		return sim.MediaLoad{}, err
	}
	return sim.MediaLoad{Images: spec.Images, Width: spec.Width, Height: spec.Height, AudioSeconds: spec.AudioSeconds}, nil
}
