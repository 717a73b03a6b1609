// Package pb holds the gRPC stubs of the Spark Connect protocol, generated from the
// .proto files inside Spark's Connect jar by scripts/gen-sparkconnect.sh. Do not edit;
// package sparkconnect is their only user.
package pb
