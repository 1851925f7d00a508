// The reference SDK's service clients: the merchant's `MerchantServiceClient` and the
// wallet's `AccountDataClient`, `WalletClient`, program, transaction and status clients, each an
// async layer over the server's signed API (`HorizonServerClient`), named as the reference names
// them so that an app written against the SDK reads the same here.
//
// Re-exported so that an app importing the service clients has the server client's types
// (`ServerClientError`, `HorizonServerClient`) without a second import.
@_exported import HorizonServerClient
