import Hummingbird
import ServiceLifecycle

/// Adds `Connection: close` to the responses written once a graceful shutdown has begun.
///
/// When the server stops, it closes each keep-alive connection after the response in progress.
/// Without the header, a client has no way to know, sends its next request on that connection
/// and sees it closed with no answer (wrk counts a read error for each). With the header, the
/// client opens a new connection instead, which the stopped listener refuses at once: a failure
/// the client can recognise as the server being gone, and retry elsewhere.
struct CloseWhenShuttingDown<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    )
        async throws -> Response
    {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            guard Task.isShuttingDownGracefully else { throw error }
            response = try error.response(from: request, context: context)
        }
        if Task.isShuttingDownGracefully { response.headers[.connection] = "close" }
        return response
    }
}
