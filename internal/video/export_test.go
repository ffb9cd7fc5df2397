package video

// SampleFramesReference is sampleFramesReference, for video_test.
var SampleFramesReference = sampleFramesReference
