// Engine is the farm (Farm: coordinator, worker runtime, protocol; no FFmpeg) with the media
// engine plugged in: the real task runner, the Live Photo resolver and the library scanner.
@_exported import Farm
